"""Pinned (page-locked) host buffers that CUDA tensors are staged through, reused and bounded.

Why a pool: pinning memory (cudaHostAlloc) costs about as much as the copy it serves and
synchronises the device, so a buffer of a given size and dtype is kept for the next outer
step, which stages the same tensors again. Why a bound: page-locked memory is taken from
the whole machine; the pool holds at most ``limit_bytes`` of idle buffers (default 8 GiB,
``$FERRY_PINNED_POOL_BYTES``, or :func:`set_pinned_pool_limit`) and drops the least
recently returned ones beyond that. A dropped buffer goes back to torch's own pinned-memory
cache (``torch.cuda.host_memory_*``), not to the system: freeing page-locked memory would
synchronise the whole device, which is what staging on a side stream avoids.

A buffer is returned with the event of the last copy that reads or writes it (the copy back
on ferry's stream) and that stream; it is handed out again once that event has completed, or
at once to a user of the same stream, whose copies run after it in stream order (and who
waits for its own first copy on that stream before the library touches the buffer). So the
next outer step reuses the buffer the last one is still copying back, and a new staging never
overwrites bytes a copy still moves.

Threads: any thread; every member is guarded by ``_lock``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable, List, Optional, Tuple

from .errors import InvalidArgumentError

__all__ = ["PinnedPool", "pinned_pool", "set_pinned_pool_limit", "DEFAULT_LIMIT_BYTES"]

DEFAULT_LIMIT_BYTES = 8 << 30

#: (key, buffer bytes) -> a new buffer; key is what take() was given.
Allocate = Callable[[Hashable, int], Any]


class PinnedPool:
    """Idle buffers by key (element count and dtype), each with the event that frees it."""

    def __init__(self, allocate: Allocate, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        self._allocate = allocate
        self._lock = threading.Lock()
        # Guarded by _lock: idle (key, buffer, nbytes, event or None, its stream), oldest first, by serial.
        self._idle: "OrderedDict[int, Tuple[Hashable, Any, int, Any, Any]]" = OrderedDict()
        self._serial = 0  # guarded by _lock
        self._held = 0  # bytes in _idle; guarded by _lock
        self._limit = limit_bytes  # guarded by _lock

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return self._held

    @property
    def limit_bytes(self) -> int:
        with self._lock:
            return self._limit

    def set_limit(self, limit_bytes: int) -> None:
        with self._lock:
            self._limit = limit_bytes
            dropped = self._trim()
        del dropped  # released outside the lock

    def take(self, key: Hashable, nbytes: int, stream: Optional[Any] = None) -> Any:
        """An idle buffer for ``key`` whose last copy has completed or ran on ``stream``, else a new one."""
        with self._lock:
            for serial, (k, buf, size, event, last) in self._idle.items():
                if k == key and (event is None or (stream is not None and last == stream) or event.query()):
                    del self._idle[serial]
                    self._held -= size
                    return buf
        return self._allocate(key, nbytes)

    def give(self, key: Hashable, buf: Any, nbytes: int, event: Optional[Any] = None,
             stream: Optional[Any] = None) -> None:
        """Returns ``buf`` (``nbytes`` long); ``event``: the last copy using it (on ``stream``), or
        None when none is pending."""
        with self._lock:
            self._idle[self._serial] = (key, buf, nbytes, event, stream)
            self._serial += 1
            self._held += nbytes
            dropped = self._trim()
        del dropped  # released outside the lock

    def _trim(self) -> List[Any]:
        """Drops the oldest idle buffers until the held bytes fit the limit; caller holds _lock.
        Returns them so that their release (torch's allocator) happens after the lock is let go."""
        dropped = []
        while self._held > self._limit and self._idle:
            _, (_, buf, size, _, _) = self._idle.popitem(last=False)
            self._held -= size
            dropped.append(buf)
        return dropped


def _pinned_tensor(key: Hashable, nbytes: int) -> Any:
    import torch

    numel, dtype = key  # type: ignore[misc]
    return torch.empty(numel, dtype=dtype, pin_memory=True)


def _limit_from_environment() -> int:
    raw = os.environ.get("FERRY_PINNED_POOL_BYTES")
    if raw is None:
        return DEFAULT_LIMIT_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidArgumentError(f"FERRY_PINNED_POOL_BYTES must be a byte count >= 0, got {raw!r}")
    return value


_POOL: Optional[PinnedPool] = None
_POOL_LOCK = threading.Lock()  # guards _POOL's creation


def pinned_pool() -> PinnedPool:
    """The process's pool of pinned torch tensors (created on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = PinnedPool(_pinned_tensor, _limit_from_environment())
        return _POOL


def set_pinned_pool_limit(limit_bytes: int) -> None:
    """Bounds the idle pinned staging buffers ferry keeps (bytes; 0 keeps none)."""
    if not isinstance(limit_bytes, int) or isinstance(limit_bytes, bool) or limit_bytes < 0:
        raise InvalidArgumentError(f"limit_bytes must be an int >= 0, got {limit_bytes!r}")
    pinned_pool().set_limit(limit_bytes)
