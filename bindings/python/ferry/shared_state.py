"""Shared state (``ferry_sync_shared_state``): named tensors every peer of a group ends up
holding identically, e.g. the model weights a newcomer must receive."""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass
from typing import Any, Collection, List, Mapping, Tuple, Union

from . import _lib
from .errors import InvalidArgumentError
from .cuda_stage import publish
from .params import uint
from .tensors import HostView, ferry_dtype

__all__ = ["SyncStrategy", "SyncInfo", "sync_shared_state"]

_DEVICE_CPU = 0  # ferry_device: staged CUDA tensors are host memory by the time ferry sees them


class SyncStrategy(enum.IntEnum):
    """``ferry_sync_strategy``."""

    #: The most common bytes among the peers at the sync's revision win; this peer's count.
    ENFORCE_POPULAR = 0
    #: This peer never sends and never counts; it ends with the winning bytes (a newcomer).
    RECEIVE_ONLY = 1
    #: This peer's bytes must win; a second send-only peer with other bytes is kicked.
    SEND_ONLY = 2


def parse_strategy(strategy: Union[str, SyncStrategy, int]) -> SyncStrategy:
    if isinstance(strategy, str):
        try:
            return SyncStrategy[strategy.upper().replace("-", "_")]
        except KeyError:
            pass
    else:
        try:
            return SyncStrategy(strategy)
        except ValueError:
            pass
    raise InvalidArgumentError(
        f"unknown sync strategy {strategy!r}; expected 'enforce_popular', 'receive_only' or 'send_only'")


@dataclass(frozen=True)
class SyncInfo:
    """What a shared-state sync did (``ferry_sync_info``).

    Attributes:
        revision: the group's revision after the sync (every peer now shares it).
        changed: names of the tensors this call overwrote, in the order given.
        bytes_sent: wire bytes served to other peers.
        bytes_received: wire bytes fetched from holders.
        duration_s: seconds the sync took.
    """

    revision: int
    changed: Tuple[str, ...]
    bytes_sent: int
    bytes_received: int
    duration_s: float


def sync_shared_state(comm_ptr: _lib.CommPtr, tensors: Mapping[str, Any], revision: int,
                      strategy: Union[str, SyncStrategy], allow_inequality: Collection[str],
                      compression_level: int) -> SyncInfo:
    """Runs the sync on a live ferry_comm; see Communicator.sync_shared_state for the contract.

    Runs on the caller's thread (the GIL is released during the C call).
    """
    strategy = parse_strategy(strategy)
    if not isinstance(tensors, Mapping):
        raise InvalidArgumentError("tensors must be a mapping of name -> tensor")
    unknown = set(allow_inequality) - set(tensors)
    if unknown:
        raise InvalidArgumentError(f"allow_inequality names unknown tensors: {sorted(unknown)}")
    uint("revision", revision, 64)
    uint("compression_level", compression_level, 32)

    lib = _lib.lib()
    template = _lib.defaults(_lib.Tensor, "ferry_tensor_init")
    array = (_lib.Tensor * len(tensors))()
    views: List[HostView] = []
    names: List[bytes] = []  # the char* fields must outlive the call
    for i, (name, tensor) in enumerate(tensors.items()):
        if not isinstance(name, str):
            raise InvalidArgumentError(f"tensor names must be strings, got {name!r}")
        label = f"tensors[{name!r}]"
        dtype = ferry_dtype(tensor, label)
        # Only a send-only peer is sure never to be written.
        view = HostView(tensor, label, writable=strategy != SyncStrategy.SEND_ONLY, copy_in=True)
        raw = name.encode()
        views.append(view)
        names.append(raw)
        entry = array[i]
        ctypes.memmove(ctypes.addressof(entry), ctypes.addressof(template), ctypes.sizeof(entry))
        entry.name, entry.data, entry.count = raw, view.ptr, view.count
        entry.dtype, entry.device = int(dtype), _DEVICE_CPU
        entry.allow_content_inequality = 1 if name in allow_inequality else 0

    for view in views:
        view.wait_copied()  # CUDA tensors: ferry's copies to host memory, not the caller's stream
    state = _lib.defaults(_lib.SharedState, "ferry_shared_state_init")
    state.revision = revision
    state.tensors = ctypes.cast(array, ctypes.POINTER(_lib.Tensor))
    state.count = len(tensors)
    state.compression_level = compression_level
    info = _lib.SyncInfoC.empty()
    code = lib.ferry_sync_shared_state(comm_ptr, ctypes.byref(state), int(strategy), ctypes.byref(info))
    _lib.check(code, "sync_shared_state")
    changed, copied_back = [], []
    for i, (name, view) in enumerate(zip(tensors, views)):
        if array[i].changed:
            copied_back += view.copy_back()  # on ferry's stream
            changed.append(name)
        view.release()
    publish(copied_back)  # the caller's current stream waits for the copies back, the host does not
    return SyncInfo(int(state.revision), tuple(changed), int(info.bytes_sent), int(info.bytes_received),
                    float(info.duration_s))
