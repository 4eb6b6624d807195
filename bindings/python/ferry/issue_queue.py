"""Async all-reduces of CUDA tensors, issued in order on a thread of the communicator's own.

Why a thread: the library needs the input's bytes in host memory before
``ferry_allreduce_async`` may be called, and they land there only when the copy that ferry
enqueued on its side stream has run, which is after whatever the training stream had
enqueued before the issue. Waiting for that in ``all_reduce_async`` would block the training
loop's host thread until the device caught up (a device sync in all but name: the GPU then
idles while the host enqueues the next kernels). So the issue is a job here: this thread
waits for ferry's copy event and then calls into C, while the caller goes on enqueueing work.

Order: collectives must be issued in the same order on every peer. Jobs run one at a time in
submission order, and every other collective call of the Communicator first drains the queue
(``drain``), so a later call never overtakes a queued issue.

Threads: any thread may submit and drain; ``_cond`` guards ``_jobs``, ``_running`` and
``_thread``. The worker exits when the queue is empty and is started again by the next submit.
"""

from __future__ import annotations

import threading
import traceback
from collections import deque
from typing import Callable, Deque, Optional

__all__ = ["IssueQueue"]


class IssueQueue:
    """FIFO of issue jobs run on one worker thread (each job handles its own errors)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._jobs: Deque[Callable[[], None]] = deque()  # guarded by _cond
        self._running = False  # a job was taken and has not returned; guarded by _cond
        self._thread: Optional[threading.Thread] = None  # the worker, while there is work; guarded by _cond

    def busy(self) -> bool:
        """True while a job is queued or running (a new issue must then queue behind it)."""
        with self._cond:
            return bool(self._jobs) or self._running

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()

    def drain(self) -> None:
        """Waits until every job submitted so far has run (each waits at most for its device copy
        and one non-blocking C call). Not from a job."""
        with self._cond:
            while self._jobs or self._running:
                self._cond.wait()

    def _work(self) -> None:
        while True:
            with self._cond:
                if not self._jobs:
                    self._thread = None
                    self._cond.notify_all()
                    return
                job = self._jobs.popleft()
                self._running = True
            try:
                job()
            except BaseException:  # noqa: BLE001 - a job records its own errors; never wedge the queue
                traceback.print_exc()
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
