"""Closes what is still open when the interpreter exits.

At exit Python frees objects in no useful order: a tensor could be freed while
an async op still writes it, or the library's threads could outlive the
objects they call back. An atexit hook (which runs before any teardown) closes
every live Communicator first (failing and reaping its ops while their tensors
still exist), then every live Master.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from typing import Any

_lock = threading.Lock()
_communicators: "weakref.WeakSet[Any]" = weakref.WeakSet()
_masters: "weakref.WeakSet[Any]" = weakref.WeakSet()


def track_communicator(comm: Any) -> None:
    with _lock:
        _communicators.add(comm)


def track_master(master: Any) -> None:
    with _lock:
        _masters.add(master)


@atexit.register
def _close_all() -> None:
    for group in (_communicators, _masters):
        with _lock:
            live = list(group)
        for obj in live:
            try:
                obj.close()
            except Exception:  # best effort: the process is ending
                pass
