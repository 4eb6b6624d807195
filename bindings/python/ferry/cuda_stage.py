"""A CUDA tensor staged through pinned host memory on ferry's own stream.

The C API reduces host memory, so a CUDA tensor's bytes travel device -> pinned buffer ->
network -> pinned buffer -> device. What this file keeps off the caller's (training) stream:

- **Copy in**: at issue an event is recorded on the caller's current stream (the producer of
  the tensor's values is enqueued before it); ferry's side stream for that device waits on the
  event and copies into a pinned buffer. The caller's stream never waits for this copy.
- **The host wait**: the library needs the bytes in host memory, so someone must wait for the
  copy's event: the thread that calls into C (Communicator's issue thread for the async form,
  so ``all_reduce_async`` returns at once; the caller itself for the blocking calls, which
  block anyway). That waits on ferry's event, never on the caller's stream.
- **Copy back**: on success, on the side stream (for an async op as soon as it finishes:
  ferry.completion_watch), and an event recorded after it. The caller's
  current stream then waits on that event (``publish``): the training stream waits only for
  this copy, never for the network, and the host never waits for the device.

Memory safety: the side stream also waits for the issue event before writing a tensor back
(an ``out`` tensor allocated on the caller's stream may reuse a block that stream still reads),
and the tensors are marked as used by the side stream (``record_stream``), so torch's caching
allocator does not hand their memory out again before the side stream's copies have run.

Threads: side streams are created once per device under ``_STREAMS_LOCK``; a stage belongs to
one operation (its ReducePlan) and is driven by one thread at a time.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Dict, List, Optional

from .pinned_pool import pinned_pool

__all__ = ["DeviceStage", "side_stream", "publish"]

_STREAMS: Dict[int, Any] = {}  # device index -> torch.cuda.Stream; guarded by _STREAMS_LOCK
_STREAMS_LOCK = threading.Lock()


def side_stream(device: Any) -> Any:
    """ferry's copy stream on ``device`` (created on first use, then kept for the process)."""
    torch = sys.modules["torch"]
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _STREAMS_LOCK:
        stream = _STREAMS.get(index)
        if stream is None:
            stream = _STREAMS[index] = torch.cuda.Stream(device=index)
        return stream


def publish(events: List[Any]) -> None:
    """Makes the calling thread's current stream on each event's device wait on it (no host wait)."""
    if not events:
        return  # host tensors only: torch may not even be loaded
    torch = sys.modules["torch"]
    for device, event in events:
        torch.cuda.current_stream(device).wait_event(event)


class DeviceStage:
    """One CUDA tensor's bytes in a pinned host buffer (``ptr``), copied on ferry's stream."""

    def __init__(self, tensor: Any, copy_in: bool) -> None:
        torch = sys.modules["torch"]
        self.tensor = tensor.detach()
        self.device = tensor.device
        self.stream = side_stream(tensor.device)
        self.key = (tensor.numel(), tensor.dtype)
        self.nbytes = tensor.numel() * tensor.element_size()
        self.host: Optional[Any] = pinned_pool().take(self.key, self.nbytes, self.stream)
        self.ptr: int = self.host.data_ptr()
        issued = torch.cuda.Event()
        issued.record(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            self.stream.wait_event(issued)
            if copy_in:
                self.host.copy_(self.tensor.reshape(-1), non_blocking=True)
            # After the copy in; without one, after the pooled buffer's last copy back on this
            # stream: either way the library may touch the buffer once it has completed.
            self.copied = torch.cuda.Event()
            self.copied.record(self.stream)
        self.tensor.record_stream(self.stream)

    def wait_copied(self) -> None:
        """Blocks this thread until the copy in has landed (ferry's event; GIL released)."""
        self.copied.synchronize()

    def copy_back(self) -> Any:
        """Enqueues the host result's copy into the tensor on ferry's stream; returns
        (device, event after it) for publish(). The pinned buffer goes back to the pool."""
        torch = sys.modules["torch"]
        assert self.host is not None
        with torch.cuda.stream(self.stream):
            self.tensor.view(-1).copy_(self.host, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.stream)
        pinned_pool().give(self.key, self.host, self.nbytes, done, self.stream)
        self.host = None
        return (self.device, done)

    def release(self) -> None:
        """The library is done with the buffer and nothing is copied back (a failed or
        read-only operation): it goes back to the pool (after the copy in, if any)."""
        if self.host is not None:
            pinned_pool().give(self.key, self.host, self.nbytes, self.copied, self.stream)
            self.host = None
