"""One async collective's life, from its issue to its settling: what a :class:`ferry.Handle`
shows the caller, and what the communicator's CallGate, issue thread and completion watch
drive. Not public: the Handle is.

States, forward only: queued (a CUDA input: the issue thread issues it once ferry's copy is
in host memory) -> issued (the C op exists) -> finished (``ferry_op_wait`` returned exactly
once, or the issue failed): results in place, or the error recorded. Whoever finishes it
(the caller's wait, the completion watch, close()) lets go of the tensors and tells the gate.

Threads: any. ``_lock`` guards ``_op`` (ferry_op_test and the hand-over to a wait); the
events ``issued`` and ``finished`` publish the rest.
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any, List, Optional

from . import _lib
from .errors import InvalidUsageError
from .handle import OpInfo
from .tensors import ReducePlan

if TYPE_CHECKING:
    from .call_gate import CallGate

__all__ = ["AsyncOp"]


class AsyncOp:
    """An all-reduce (or all-gather: ``plan`` is then a GatherPlan) issued asynchronously.

    ``plan`` holds the tensors and staging copies the library borrows; ``result`` is what the
    caller reads once finished (the output tensor, or the gathered parts).
    """

    def __init__(self, plan: ReducePlan, gate: "CallGate") -> None:
        self._lock = threading.Lock()
        self._op: Optional[_lib.OpPtr] = None
        self.issued = threading.Event()  # the C op exists, or its issue failed
        self.finished = threading.Event()  # ferry_op_wait returned (or the issue failed): outcome recorded
        self._plan: Optional[ReducePlan] = plan
        self.result: Any = plan.result
        self.info: Optional[OpInfo] = None
        self.error: Optional[Exception] = None
        self.copied_back: List[Any] = []  # (device, event) of CUDA results' copies back, for publish()
        self._gate = gate
        self._name = getattr(plan, "call_name", "all_reduce")

    # ------------------------------------------------------------------ issue

    def issue_done(self, op: _lib.OpPtr) -> None:
        """The C op was issued."""
        with self._lock:
            self._op = op
        self.issued.set()

    def issue_failed(self, error: Exception) -> None:
        """The op could not be issued (e.g. the communicator closed): wait() raises ``error``."""
        try:
            self.error = error
            if self._plan is not None:
                self._plan.release()
        finally:
            self._plan = None
            self._gate.forget(self)
            self.finished.set()
            self.issued.set()

    # ------------------------------------------------------------------ progress

    def done(self) -> bool:
        """Non-blocking: True once ``reap()`` would not block."""
        if not self.issued.is_set():
            return False
        with self._lock:
            if self._op is None:
                return self.finished.is_set()
            flag = ctypes.c_int(0)
            _lib.check(_lib.lib().ferry_op_test(self._op, ctypes.byref(flag)), "Handle.done()")
            return bool(flag.value)

    def wait(self) -> None:
        """Blocks until finished: the caller's wait, counted by the gate as a running call (so
        an op that fails on its own reports its own error, not "closed"); interruptible on
        the main thread, as every blocking call."""
        if self.finished.is_set():
            return
        self.issued.wait()  # a CUDA input: the issue thread waits for ferry's copy, then issues
        try:
            ptr = self._gate.begin("wait")
        except InvalidUsageError:
            pass  # closing: close() settles this op
        else:
            self._gate.run_blocking(ptr, "Handle.wait", self.reap)
        self.finished.wait()

    def reap_if_done(self) -> bool:
        """The completion watch: reaps the op if it has finished, which enqueues a CUDA result's
        copy back at once. True once the op is settled, or is close()'s to settle."""
        if self.finished.is_set():
            return True
        if not self.issued.is_set():
            return False
        try:
            self._gate.begin("wait")  # close() does not destroy under the reap
        except InvalidUsageError:
            return True  # closing: close() settles it
        try:
            if self.done():
                self.reap()  # ferry_op_wait of a finished op: returns at once
                return True
            return False
        finally:
            self._gate.end()

    # ------------------------------------------------------------------ settling

    def reap(self) -> None:
        """Waits the C op if nobody did (exactly once per op) and records the outcome."""
        with self._lock:
            op, self._op = self._op, None
        if op is None:
            return
        try:
            info = _lib.OpInfoC.empty()
            code = _lib.lib().ferry_op_wait(op, ctypes.byref(info))
            assert self._plan is not None
            try:
                _lib.check(code, self._name)
                self.copied_back = self._plan.copy_back()  # published by wait(), on the caller's thread
                self.info = OpInfo.from_c(info)
            except Exception as e:  # noqa: BLE001 - FerryError, or a CUDA error copying back: wait() raises it
                self._plan.release()
                self.error = e
        finally:
            self._plan = None  # the library no longer borrows the buffers
            self._gate.forget(self)
            self.finished.set()

    def settle_closed(self) -> None:
        """close(), after the destroy: waits an op that was still in flight.

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
            self.error = InvalidUsageError(f"{self._name}: the communicator was closed while this operation "
                                           "was in flight")
            if self._plan is not None:
                self._plan.release()
            self._plan = None
            self._gate.forget(self)
            self.finished.set()
