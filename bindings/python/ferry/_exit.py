"""Closes what is still open when the interpreter exits, or when it is collected unclosed.

At exit Python frees objects in no useful order: a tensor could be freed while
an async op still writes it, or the library's threads could outlive the
objects they call back. An atexit hook (which runs before any teardown) closes
every live Communicator first (failing and reaping its ops while their tensors
still exist), then every live Master.

An object collected without close() is closed on a thread of its own (close_unclosed):
close() may take seconds (the goodbye to the master, the ops in flight releasing their
buffers), which a garbage-collection pass, run wherever an allocation happens to trigger it,
must not wait for. The thread keeps the object alive until it is closed; the interpreter
waits for it at exit (not a daemon). A ResourceWarning says so, as for an unclosed file.
"""

from __future__ import annotations

import atexit
import threading
import warnings
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


def close_unclosed(obj: Any, what: str) -> None:
    """From ``obj.__del__``: starts ``obj.close()`` on a thread, then warns (ResourceWarning)."""
    try:
        threading.Thread(target=obj.close, name=f"ferry-close-unclosed-{type(obj).__name__}").start()
    except RuntimeError:  # interpreter shutdown: no new thread, and nothing left to hold up
        obj.close()
    # After the close is on its way: a warnings filter may turn this into an exception.
    warnings.warn(f"unclosed {what}: call close() or use `with` (closing it on a thread)", ResourceWarning,
                  source=obj)


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
