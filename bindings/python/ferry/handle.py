"""Results of collectives: :class:`OpInfo`, and :class:`Handle` for an all-reduce in flight."""

from __future__ import annotations

import ctypes
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, List, Optional, TypeVar

from . import _lib
from .cuda_stage import publish
from .errors import InvalidUsageError
from .tensors import ReducePlan

if TYPE_CHECKING:
    from .communicator import Communicator

__all__ = ["OpInfo", "Handle"]

#: The type of the tensor the all-reduce writes (Handle.output).
T = TypeVar("T")


@dataclass(frozen=True)
class OpInfo:
    """What a finished collective did (``ferry_op_info``).

    Attributes:
        world_size: peers the operation ran with (for all_reduce_many: the final world).
        bytes_sent: payload bytes this peer put on the wire.
        bytes_received: payload bytes this peer received.
        duration_s: seconds from the call to the master's commit.
        start_s: of those, waiting for the master's go (at most timeout).
        longest_stall_s: the longest stretch of the transfer without progress
            (at most progress_timeout).
        commit_s: from this peer's end to the master's verdict (at most 2 x timeout).
        quant_agreement_s: the integer-domain quantizations (i8h, i4h, ...): from the
            master's go to the first chunk's agreed scales, before which the ring cannot
            start (later chunks agree while earlier ones move); else 0.
        For all_reduce_many these phases are the longest any operation had.
    """

    world_size: int
    bytes_sent: int
    bytes_received: int
    duration_s: float
    start_s: float = 0.0
    longest_stall_s: float = 0.0
    commit_s: float = 0.0
    quant_agreement_s: float = 0.0

    @classmethod
    def from_c(cls, info: _lib.OpInfoC) -> "OpInfo":
        return cls(int(info.world_size), int(info.bytes_sent), int(info.bytes_received), float(info.duration_s),
                   float(info.start_s), float(info.longest_stall_s), float(info.commit_s),
                   float(info.quant_agreement_s))


class Handle(Generic[T]):
    """An all-reduce in flight, from :meth:`Communicator.all_reduce_async` (or an all-gather,
    from :meth:`Communicator.all_gather_async`: ``output`` is then the list of parts, filled
    when :meth:`wait` returns without raising).

    The handle keeps the input and output tensors (and any staging copies)
    alive until the operation has been waited: do not read or write them
    before :meth:`wait` returns. Handles may be waited in any order, from
    any thread. The C op is released by the first :meth:`wait`; later calls
    (from any thread) return the same :class:`OpInfo` or raise the same
    exception. The communicator also holds every unwaited handle, so
    dropping a handle never frees memory the library still writes; closing
    the communicator settles the handles still unwaited (see Communicator.close).

    CUDA tensors: the C op is issued by the communicator's issue thread once ferry's
    copy of the input has reached host memory (see ferry.issue_queue); until then the
    handle is not done. The result's copy back is enqueued on ferry's stream as soon as
    the op finishes (ferry.completion_watch); :meth:`wait` makes the calling thread's
    current CUDA stream wait for it (an event); it does not block the host on the
    device, so work the caller enqueues after wait() sees the result.
    """

    def __init__(self, op: Optional[_lib.OpPtr], plan: ReducePlan, owner: "Communicator") -> None:
        self._lock = threading.Lock()  # guards _op: ferry_op_test and the hand-over to wait
        self._op: Optional[_lib.OpPtr] = op
        # Set once the C op exists (op given, or the issue thread issued it) or its issue failed.
        self._issued = threading.Event()
        if op is not None:
            self._issued.set()
        self._finished = threading.Event()  # set once ferry_op_wait has returned and results are in place
        self._plan: Optional[ReducePlan] = plan
        self._output: T = plan.result
        self._info: Optional[OpInfo] = None
        self._error: Optional[Exception] = None
        self._copied_back: List[Any] = []  # (device, event) of CUDA results' copies back, for publish()
        # Weak: the communicator holds its unwaited handles; when it is collected it has
        # closed, and close() settled every handle.
        self._owner = weakref.ref(owner)

    @property
    def output(self) -> T:
        """The tensor that receives the result (the input itself when ``out`` was None).
        Valid to read only after :meth:`wait` returned without raising."""
        return self._output

    def done(self) -> bool:
        """Non-blocking: True once the operation finished, i.e. :meth:`wait` will not block.
        (A staged CUDA result becomes visible to the caller's stream only by wait().) Any thread."""
        if not self._issued.is_set():
            return False
        with self._lock:
            if self._op is None:
                return self._finished.is_set()
            flag = ctypes.c_int(0)
            _lib.check(_lib.lib().ferry_op_test(self._op, ctypes.byref(flag)), "ferry_op_test")
            return bool(flag.value)

    def wait(self) -> OpInfo:
        """Blocks until the operation finishes and returns its :class:`OpInfo`.

        Blocks at most the communicator's deadlines (timeout to start, 2 x
        timeout to commit, progress_timeout without progress); the GIL is released while
        it waits. Raises the operation's error (e.g. PeerLostError, MismatchError);
        on failure the output holds unspecified values, and the input (when
        ``out`` was given) is intact. Any thread; repeated calls return the
        cached result or raise the cached error. A wait in progress holds off
        Communicator.close() until it returns; an op still in flight when the
        communicator is closed raises InvalidUsageError. On the main thread Ctrl-C raises
        KeyboardInterrupt at once and closes the communicator (see Communicator, "Ctrl-C").
        """
        if not self._finished.is_set():
            self._issued.wait()  # a CUDA input: the issue thread waits for ferry's copy, then issues
            owner = self._owner()
            if owner is not None:
                try:
                    # Counted as a running call: close() lets this wait end before it destroys,
                    # so an op that fails on its own reports its own error, not "closed".
                    ptr = owner._begin_call("wait")
                except InvalidUsageError:
                    pass  # closing: close() settles this handle
                else:
                    # On the main thread Ctrl-C interrupts it and closes the communicator.
                    owner._run_blocking(ptr, "Handle.wait", self._reap)
            else:
                self._settle_closed()  # unreachable by design: a collected communicator settled its handles
            self._finished.wait()
        if self._error is not None:
            raise self._error
        assert self._info is not None
        publish(self._copied_back)  # this thread's current stream waits for the copy back
        return self._info

    def _reap_if_done(self) -> bool:
        """CompletionWatch: reaps the op if it has finished, which enqueues a CUDA result's copy
        back at once. True once the handle is settled, or is close()'s to settle."""
        if self._finished.is_set():
            return True
        if not self._issued.is_set():
            return False
        owner = self._owner()
        if owner is None:
            return True
        try:
            owner._begin_call("wait")  # close() does not destroy under the reap
        except InvalidUsageError:
            return True  # closing: close() settles it
        try:
            if self.done():
                self._reap()  # ferry_op_wait of a finished op: returns at once
                return True
            return False
        finally:
            owner._end_call()

    def _issue_done(self, op: _lib.OpPtr) -> None:
        """The issue thread issued the C op."""
        with self._lock:
            self._op = op
        self._issued.set()

    def _issue_failed(self, error: Exception) -> None:
        """The issue thread could not issue the op (e.g. the communicator closed): wait() raises error."""
        try:
            self._error = error
            if self._plan is not None:
                self._plan.release()
        finally:
            self._plan = None
            self._forget()
            self._finished.set()
            self._issued.set()

    def _complete(self, op: _lib.OpPtr) -> None:
        """Runs ferry_op_wait (exactly once per op) and records the outcome."""
        try:
            info = _lib.OpInfoC.empty()
            code = _lib.lib().ferry_op_wait(op, ctypes.byref(info))
            assert self._plan is not None
            try:
                _lib.check(code, getattr(self._plan, "call_name", "all_reduce"))
                self._copied_back = self._plan.copy_back()  # published by wait(), on the caller's thread
                self._info = OpInfo.from_c(info)
            except Exception as e:  # noqa: BLE001 - FerryError, or a CUDA error copying back: wait() raises it
                self._plan.release()
                self._error = e
        finally:
            self._plan = None  # the library no longer borrows the buffers
            self._forget()
            self._finished.set()

    def _reap(self) -> None:
        """wait(), and Communicator.close() before the destroy: waits the op if nobody did."""
        with self._lock:
            op, self._op = self._op, None
        if op is not None:
            self._complete(op)

    def _settle_closed(self) -> None:
        """Communicator.close(), after the destroy: waits an op that was still in flight.

        The destroy failed it and released its buffers; ferry_op_wait then returns at once
        and frees the C op (ferry.h: ops must be waited even after ferry_comm_destroy).
        Its wait() reports the close, the cause, rather than the library's error.
        """
        with self._lock:
            op, self._op = self._op, None
        if op is None:
            return
        try:
            _lib.lib().ferry_op_wait(op, None)
        finally:
            name = getattr(self._plan, "call_name", "all_reduce")
            self._error = InvalidUsageError(
                f"{name}: the communicator was closed while this operation was in flight")
            if self._plan is not None:
                self._plan.release()
            self._plan = None
            self._forget()
            self._finished.set()

    def _forget(self) -> None:
        owner = self._owner()
        if owner is not None:
            owner._forget(self)

    def __repr__(self) -> str:
        if self._finished.is_set():
            state = "failed" if self._error is not None else "done"
        else:
            state = "in flight"
        return f"<ferry.Handle {state}>"
