"""All-gather: every peer's bytes (its own length, zero allowed) to every peer, in rank order.

The input is any contiguous torch tensor (CPU, or CUDA staged through host memory),
C-contiguous NumPy array, or bytes-like object; it is sent as raw bytes. The result is
a list of ``bytes``, one per rank of the group (``comm.rank`` indexes its own), the same
on every peer. See ferry.h, ``ferry_all_gather``, for the contract: agreed with the
master like every collective (the tags must match, the lengths may differ), and on any
failure no result at all.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, List, Optional

from . import _lib
from .errors import InvalidArgumentError
from .handle import Handle, OpInfo
from .legacy import legacy_call
from .params import uint
from .tensors import HostView, ferry_dtype

if TYPE_CHECKING:
    from .communicator import Communicator

__all__ = ["GatherCalls", "GatherPlan"]


class GatherCalls:
    """The all-gather calls of :class:`ferry.Communicator` (mixed in; they use its call machinery)."""

    @legacy_call(positional=("tag",))
    def all_gather(self: "Communicator", buffer: Any, *, tag: int = 0) -> List[bytes]:
        """Collective: every peer's ``buffer`` (its own length; zero allowed) to every peer.

        Returns a list of ``bytes``, one per rank in rank order (``comm.rank`` is this
        peer's own), the same on every peer. ``buffer``: a contiguous torch.Tensor (CPU,
        or CUDA staged through host memory), a C-contiguous numpy.ndarray, or any
        bytes-like object; its raw bytes are sent. ``tag`` names the operation and must
        match on every peer (the lengths need not). On the wire each peer receives the
        others' bytes once: (N - 1) x the mean contribution.

        Blocks like :meth:`all_reduce` (the same deadlines; GIL released). On failure
        nothing is returned: the error is raised, and after PeerLostError the call can be
        retried once update_topology() re-formed the group. Raises InvalidArgumentError,
        InvalidUsageError (not connected, closed), MismatchError (another call or tag
        here), PeerLostError, TimeoutError, MasterLostError, KickedError, ProtocolError.
        """
        plan = GatherPlan(buffer, tag)
        desc = plan.desc()
        info = _lib.OpInfoC.empty()
        plan.wait_copied()
        try:
            # The closure holds plan, desc and info: an interrupted call still borrows them.
            self._blocking("all_gather", lambda ptr: _lib.check(_lib.lib().ferry_all_gather(
                ptr, plan.send_ptr, plan.nbytes, ctypes.byref(desc), ctypes.byref(plan.gathered),
                ctypes.byref(info)), "all_gather"))
            self._local.info = OpInfo.from_c(info)
            return plan.finish()
        finally:
            plan.release()

    @legacy_call(positional=("tag",))
    def all_gather_async(self: "Communicator", buffer: Any, *, tag: int = 0) -> Handle[List[bytes]]:
        """Issues the all-gather described for :meth:`all_gather` and returns at once.

        ``handle.wait()`` returns its OpInfo; ``handle.output`` is the list of parts, filled
        once wait() returned without raising. The library borrows ``buffer`` until then
        (the handle keeps it alive). Ordering, concurrency and errors as
        :meth:`all_reduce_async`.
        """
        plan = GatherPlan(buffer, tag)
        desc = plan.desc()
        return self._start_async("all_gather_async", plan, lambda ptr, op_ptr: _lib.lib().ferry_all_gather_async(
            ptr, plan.send_ptr, plan.nbytes, ctypes.byref(desc), ctypes.byref(plan.gathered), ctypes.byref(op_ptr)))


class GatherPlan:
    """The host bytes one all-gather sends, the result it fills, and what to keep alive until it ends.

    Shaped like tensors.ReducePlan, so that a Handle carries an async all-gather as it carries an
    all-reduce: ``result`` is the list the parts go into once the op succeeded (empty before).
    """

    call_name = "all_gather"

    def __init__(self, buffer: Any, tag: int) -> None:
        self.tag = uint("tag", tag, 64)
        self._view: Optional[HostView] = None
        self._keep: Any = None  # a bytes-like input, or its copy, while the library borrows it
        if _is_bytes_like(buffer):
            raw = memoryview(buffer)
            if not raw.c_contiguous:
                raise InvalidArgumentError("buffer is not contiguous")
            raw = raw.cast("B")
            self.nbytes = raw.nbytes
            if raw.readonly:
                self._keep = (ctypes.c_char * self.nbytes).from_buffer_copy(raw)
            else:
                self._keep = (ctypes.c_char * self.nbytes).from_buffer(raw)
            self.send_ptr = ctypes.addressof(self._keep) if self.nbytes else None
        else:
            dtype = ferry_dtype(buffer, "buffer")
            self._view = HostView(buffer, "buffer", writable=False, copy_in=True)
            self.nbytes = self._view.count * dtype.itemsize
            self.send_ptr = self._view.ptr if self.nbytes else None
        self.on_device = self._view is not None and self._view.stage is not None
        self.result: List[bytes] = []
        self.gathered = _lib.GatheredPtr()  # set by the C issue

    def desc(self) -> "_lib.AllGatherDesc":
        desc = _lib.defaults(_lib.AllGatherDesc, "ferry_all_gather_desc_init")
        desc.tag = self.tag
        return desc

    def wait_copied(self) -> None:
        if self._view is not None:
            self._view.wait_copied()

    def copy_back(self) -> List[Any]:
        """After success: reads every part out of the library's result into ``result``, frees it."""
        lib = _lib.lib()
        members = ctypes.c_uint32(0)
        _lib.check(lib.ferry_gathered_layout(self.gathered, ctypes.byref(members), None, None), "all_gather")
        data = ctypes.c_void_p()
        size = ctypes.c_size_t(0)
        parts = []
        for rank in range(members.value):
            _lib.check(lib.ferry_gathered_part(self.gathered, rank, ctypes.byref(data), ctypes.byref(size)),
                       "all_gather")
            parts.append(ctypes.string_at(data.value, size.value) if size.value else b"")
        self.result[:] = parts
        self.release()
        return []

    def release(self) -> None:
        """Lets go of the library's result and of the input (after the op ended, either way)."""
        if self.gathered:
            _lib.lib().ferry_gathered_destroy(self.gathered)
            self.gathered = _lib.GatheredPtr()
        if self._view is not None and self._view.stage is not None:
            self._view.stage.release()
        self._keep = None

    def finish(self) -> List[bytes]:
        """After a blocking call's success: the parts."""
        self.copy_back()
        return self.result


def _is_bytes_like(obj: Any) -> bool:
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return True
    module = type(obj).__module__
    if module.startswith("torch") or module.startswith("numpy"):
        return False
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True
