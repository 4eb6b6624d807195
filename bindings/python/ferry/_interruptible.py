"""Blocking C calls that Ctrl-C interrupts on the main thread.

Python runs signal handlers only on the main thread, between bytecodes. A
blocking ctypes call (an all-reduce waiting for a peer) runs no bytecode until
it returns, so a SIGINT raised KeyboardInterrupt only at the call's deadline.
Here the main thread hands the call to a helper thread and waits for it in
slices of ``SLICE_S`` on a lock (an interruptible wait that releases the GIL), so
a signal handler's exception -- KeyboardInterrupt, or a SystemExit from a
SIGTERM handler -- reaches it within a slice. The caller's ``on_interrupt``
(``ferry_comm_abort``) then makes the C call return promptly on the helper,
and the exception goes on up; the helper finishes the call and runs its
``after`` (ending the call's count, so close() may destroy) whenever it returns.

Only a handler that raises aborts the call: one that just logs (or counts
Ctrl-Cs) runs during the call, and the call goes on. Calls from other threads
run directly: no signal handler runs there.

Cost: one helper thread per process, kept between calls, so a call pays two
thread hand-overs (30 to 50 us on a loaded 2-core machine; bindings/python/README.md, "Ctrl-C"), not
a thread start.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Optional, TypeVar

__all__ = ["run_interruptibly", "SLICE_S"]

R = TypeVar("R")

# Longest a signal handler waits to run when its signal landed on another thread (the main
# thread's lock wait is woken by EINTR when the signal lands on it).
SLICE_S = 0.05


class _Call:
    """One C call handed to a helper: its result, or the exception it raised."""

    # Its states, forward only.
    NEW, RUNNING, FINISHED, WITHDRAWN = range(4)

    def __init__(self, call: Callable[[], object], after: Callable[[], None]) -> None:
        self.call = call
        self.after = after
        self.done = threading.Lock()  # held until the call and `after` have run
        self.done.acquire()
        self.result: object = None
        self.error: Optional[BaseException] = None
        # Held while the state moves, and by the interrupted waiter while it acts on the
        # state it read: so `after` (which may let the handle be destroyed) never runs
        # while the waiter aborts the call.
        self.lock = threading.Lock()
        self.state = _Call.NEW  # guarded by lock

    def run(self) -> None:
        with self.lock:
            if self.state != _Call.NEW:
                return  # withdrawn before the hand-over completed
            self.state = _Call.RUNNING
        try:
            self.result = self.call()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            self.error = e
        finally:
            try:
                with self.lock:
                    self.state = _Call.FINISHED
                    self.after()
            finally:
                self.done.release()


class _Helper:
    """The thread that runs the main thread's blocking calls, one at a time."""

    def __init__(self) -> None:
        self.free = threading.Lock()  # held by whoever handed the helper a call, until it ended
        self._go = threading.Lock()  # released to hand over self._next
        self._go.acquire()
        self._next: Optional[_Call] = None
        threading.Thread(target=self._serve, name="ferry-main-thread-calls", daemon=True).start()

    def hand(self, call: _Call) -> None:
        """self.free is held by the caller."""
        self._next = call
        self._go.release()

    def _serve(self) -> None:
        while True:
            self._go.acquire()
            call, self._next = self._next, None
            assert call is not None
            try:
                call.run()
            finally:
                self.free.release()


_helper: Optional[_Helper] = None
_helper_lock = threading.Lock()


def _get_helper() -> _Helper:
    global _helper
    helper = _helper
    if helper is None:
        with _helper_lock:
            if _helper is None:
                _helper = _Helper()
            helper = _helper
    return helper


def _forget_helper() -> None:
    global _helper, _helper_lock
    _helper, _helper_lock = None, threading.Lock()  # a forked child has no helper thread


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helper)


def run_interruptibly(call: Callable[[], R], after: Callable[[], None],
                      on_interrupt: Callable[[bool], None]) -> R:
    """``call()`` then ``after()``, on whatever thread runs call; returns call's result or raises its error.

    On the main thread, an exception raised meanwhile by a signal handler runs
    ``on_interrupt(running)`` before ``after`` has run, and propagates at once.
    ``running``: the call is still in progress (on_interrupt must make it return soon;
    it and ``after`` then finish on the helper), else it had not begun (it never will)
    or had returned. ``call`` must keep alive everything the C call borrows (its
    closure does): the caller's frame is gone before it returns.
    """
    if threading.current_thread() is not threading.main_thread():
        try:
            return call()
        finally:
            after()
    job = _Call(call, after)
    try:
        helper = _get_helper()
        if helper.free.acquire(blocking=False):
            helper.hand(job)
        else:
            # The helper still finishes an interrupted call (or a signal handler calls in
            # while the main thread waits): this call gets a thread of its own.
            threading.Thread(target=job.run, name="ferry-main-thread-call", daemon=True).start()
        while not job.done.acquire(timeout=SLICE_S):
            pass
    except BaseException:
        with job.lock:
            state = job.state
            if state == _Call.NEW:
                job.state = _Call.WITHDRAWN  # no thread began the call: none ever will
            try:
                on_interrupt(state == _Call.RUNNING)
            finally:
                if state == _Call.NEW:
                    after()
        raise
    error, job.error = job.error, None  # no cycle job -> error -> traceback -> job.run's frame -> job
    if error is not None:
        raise error
    return job.result  # type: ignore[return-value]
