"""The gate every C call on one ``ferry_comm`` passes: the Communicator's calls and its async
ops' waits alike, so that neither reaches into the other's members.

Why one object: ferry.h forbids ``ferry_comm_destroy`` to race with any call on the handle,
so close() must wait for every call running on other threads (Handle.wait included) and
refuse new ones; a Ctrl-C in a blocking call on the main thread closes the communicator
(``ferry_comm_abort`` first, the destroy on a thread of its own); and the async ops still
unsettled at close are reaped (finished ones, before the destroy) or failed (those in flight,
after it), so that their tensors are let go. The gate counts the calls, holds the unsettled
ops and runs that sequence; the Communicator and the ops only call its methods.

Threads: any thread may call any method. ``_cond`` guards ``_ptr``, ``_closed``,
``_closing``, ``_interrupted_in`` and ``_active``; ``_ops_lock`` guards ``_ops``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Set, TypeVar

from . import _lib
from ._interruptible import run_interruptibly
from .errors import InvalidUsageError

if TYPE_CHECKING:
    from .async_op import AsyncOp

__all__ = ["CallGate"]

R = TypeVar("R")


class CallGate:
    """Counts the C calls on one live ``ferry_comm`` and closes it when none runs.

    ``before_destroy`` runs at the start of close(), before anything is settled (the
    Communicator's issue queue drains there, so every queued op has its C op or its error).
    """

    def __init__(self, ptr: _lib.CommPtr, before_destroy: Callable[[], None]) -> None:
        self._cond = threading.Condition()
        self._ptr: Optional[_lib.CommPtr] = ptr  # None once destroyed
        self._closed = False  # no new call may begin
        self._closing = False  # a close() is destroying the handle; other close() calls wait for it
        self._interrupted_in: Optional[str] = None  # the call whose interrupt closed the gate
        self._active = 0  # C calls running on _ptr; close() waits for them to return
        self._ops_lock = threading.Lock()
        self._ops: Set["AsyncOp"] = set()  # unsettled async ops (they hold the borrowed tensors)
        self._before_destroy = before_destroy

    @property
    def closed(self) -> bool:
        """No call may begin (close() began, or an interrupt closed it)."""
        return self._closed

    @property
    def destroyed(self) -> bool:
        """The C handle is gone (close() has run to its end)."""
        return self._ptr is None

    # ------------------------------------------------------------------ calls

    def begin(self, what: str) -> _lib.CommPtr:
        """Counts a C call (close() waits until none runs) and returns the handle for it;
        InvalidUsageError, naming ``what``, once closed. Pair it with end()."""
        with self._cond:
            if self._closed:
                if self._interrupted_in is not None:
                    raise InvalidUsageError(f"{what}: the communicator is closed: {self._interrupted_in}")
                raise InvalidUsageError(f"{what}: the communicator is closed")
            self._active += 1
            assert self._ptr is not None
            return self._ptr

    def end(self) -> None:
        with self._cond:
            self._active -= 1
            if self._active == 0:
                self._cond.notify_all()

    @contextlib.contextmanager
    def call(self, what: str) -> Iterator[_lib.CommPtr]:
        """A short C call: ``with gate.call("ring") as ptr: ...``."""
        ptr = self.begin(what)
        try:
            yield ptr
        finally:
            self.end()

    def run_blocking(self, ptr: _lib.CommPtr, what: str, call: Callable[[], R]) -> R:
        """``call()``, a blocking C call already begun (begin()); ends it when call returns.

        On the main thread Ctrl-C interrupts it and closes the gate (ferry.Communicator's
        docstring, "Ctrl-C"). ``call`` must hold what the C call borrows: when interrupted,
        it returns after this does.
        """
        return run_interruptibly(call, self.end, lambda running: self._interrupt(ptr, what, running))

    def _interrupt(self, ptr: _lib.CommPtr, what: str, running: bool) -> None:
        """A signal handler raised in the main thread's blocking call ``what``.

        The call still counts as begun, so the handle is alive. When the C call is still
        running, the abort ends it (and every other call on the handle) in milliseconds; the
        destroy waits for that on a thread of its own, so the exception reaches the caller at once.
        """
        if running:
            _lib.lib().ferry_comm_abort(ptr)
        cause = sys.exc_info()[0]
        with self._cond:
            self._closed = True
            if self._interrupted_in is None:
                self._interrupted_in = f"{what}() was interrupted ({cause.__name__ if cause else 'signal'})"
        threading.Thread(target=self.close, name="ferry-close-after-interrupt", daemon=True).start()

    # ------------------------------------------------------------------ async ops

    def track(self, op: "AsyncOp") -> None:
        """An async op issued (or queued) on this handle: close() settles it if nobody waited it."""
        with self._ops_lock:
            self._ops.add(op)

    def forget(self, op: "AsyncOp") -> None:
        """The op was settled: the gate no longer needs to hold it."""
        with self._ops_lock:
            self._ops.discard(op)

    def unsettled(self) -> List["AsyncOp"]:
        """The async ops not settled yet (a snapshot)."""
        with self._ops_lock:
            return list(self._ops)

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Refuses new calls, waits for the running ones (and for a close already destroying
        on another thread), then destroys the handle: ops that had finished are reaped first,
        those still in flight are failed by the destroy and settled after it. Idempotent."""
        with self._cond:
            self._closed = True
            # After a Ctrl-C a thread of ours closes too: a close() at exit waits for its destroy.
            while self._active or self._closing:
                self._cond.wait()
            if self._ptr is None:
                return
            self._closing = True
        try:
            self._before_destroy()
            # Unwaited ops that already finished are reaped while the communicator still exists.
            for op in self.unsettled():
                if op.done():
                    op.reap()
            ptr, self._ptr = self._ptr, None
            _lib.lib().ferry_comm_destroy(ptr)  # fails the ops in flight; their buffers are free after it
            for op in self.unsettled():
                op.settle_closed()
        finally:
            with self._cond:
                self._closing = False
                self._cond.notify_all()
