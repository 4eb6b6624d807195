"""Async all-reduces of CUDA tensors, reaped as soon as they finish, so the copy back starts then.

Why: the result's copy back to the device (on ferry's stream) can only be enqueued once the
op has finished, and ``Handle.wait()`` makes the caller's stream wait for that copy. Enqueued
by wait() itself, the copy (4 GB of parameters: ~0.1 s over PCIe) would stall the training
stream at every sync point; enqueued when the network finishes, it is long done by the time
DiLoCo's next sync point waits.

How: one thread per communicator polls its watched handles every ``POLL_S`` with
``ferry_op_test`` (non-blocking) and reaps a finished one (``ferry_op_wait`` then returns at
once), counted as a running call so that close() never destroys under it. It never blocks on
the network, so close() and Ctrl-C keep their meaning: an op still in flight is the caller's
to wait or close()'s to fail. The poll holds the GIL for microseconds per tick.

Threads: any thread may watch; ``_lock`` guards ``_handles`` and ``_thread``. The thread exits
once nothing is watched and is started again by the next watch().
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:
    from .async_op import AsyncOp

__all__ = ["CompletionWatch", "POLL_S"]

POLL_S = 0.002  # a finished op waits at most this long for its copy back to be enqueued


class CompletionWatch:
    """Reaps watched handles once their ops finished (AsyncOp.reap_if_done)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._handles: List["AsyncOp"] = []  # guarded by _lock
        self._thread: Optional[threading.Thread] = None  # the poller, while anything is watched; guarded by _lock

    def watch(self, handle: "AsyncOp") -> None:
        with self._lock:
            self._handles.append(handle)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._handles:
                    self._thread = None
                    return
                handles = list(self._handles)
            settled = []
            for handle in handles:
                try:
                    if handle.reap_if_done():
                        settled.append(handle)
                except BaseException:  # noqa: BLE001 - the handle records its own errors; keep polling the rest
                    traceback.print_exc()
                    settled.append(handle)
            with self._lock:
                self._handles = [h for h in self._handles if h not in settled]
            time.sleep(POLL_S)
