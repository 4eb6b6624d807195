"""Turns torch tensors and NumPy arrays into the raw buffers the C API reduces.

Zero-copy: a contiguous CPU tensor (``tensor.data_ptr()``) or C-contiguous
array (``array.ctypes.data``) is handed to libferry as is; the result is
written into that very memory, so every view of it sees the result.

CUDA tensors are staged through pinned host memory on ferry's own stream
(``cuda_stage``): the input is copied in on that stream after an event recorded on
the caller's current stream when the operation is issued, reduced on the host,
and copied back on ferry's stream when it succeeds; the caller's current stream
then waits on the copy back's event (``all_reduce`` returns, or ``Handle.wait()``
returns), never on the network and never with a host-side device sync. A failed
reduction leaves the CUDA tensor untouched. Other devices are refused.

Neither torch nor NumPy is imported here: an object is recognised only if its
module is already loaded, so ``import ferry`` stays light.

Supported element types (torch 1.13 has no uint16/32/64; NumPy has no bfloat16):

===========  ===================  ===============
ferry        torch                numpy
===========  ===================  ===============
U8 I8        uint8 int8           uint8 int8
U16 I16      -     int16          uint16 int16
U32 I32      -     int32          uint32 int32
U64 I64      -     int64          uint64 int64
F16 BF16     float16 bfloat16     float16 -
F32 F64      float32 float64      float32 float64
===========  ===================  ===============
"""

from __future__ import annotations

import sys
from typing import Any, List, Optional, Sequence, Tuple

from .cuda_stage import DeviceStage, publish
from .dtypes import DType
from .errors import InvalidArgumentError

__all__ = ["HostView", "ReducePlan", "plan_allreduce", "plan_many", "ferry_dtype"]

_TORCH_DTYPES = {
    "torch.uint8": DType.U8, "torch.int8": DType.I8, "torch.int16": DType.I16, "torch.int32": DType.I32,
    "torch.int64": DType.I64, "torch.float16": DType.F16, "torch.bfloat16": DType.BF16,
    "torch.float32": DType.F32, "torch.float64": DType.F64,
    # Newer torch releases have unsigned 16/32/64-bit tensors.
    "torch.uint16": DType.U16, "torch.uint32": DType.U32, "torch.uint64": DType.U64,
}

_NUMPY_DTYPES = {
    ("u", 1): DType.U8, ("i", 1): DType.I8, ("u", 2): DType.U16, ("i", 2): DType.I16,
    ("u", 4): DType.U32, ("i", 4): DType.I32, ("u", 8): DType.U64, ("i", 8): DType.I64,
    ("f", 2): DType.F16, ("f", 4): DType.F32, ("f", 8): DType.F64,
}


def _torch(obj: Any) -> Any:
    """The torch module if obj is a torch.Tensor, else None."""
    torch = sys.modules.get("torch")
    return torch if torch is not None and isinstance(obj, torch.Tensor) else None


def _is_numpy(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _kind_error(name: str, obj: Any) -> InvalidArgumentError:
    return InvalidArgumentError(f"{name} must be a torch.Tensor or numpy.ndarray, not {type(obj).__name__}")


def ferry_dtype(obj: Any, name: str = "tensor") -> DType:
    """The ferry dtype of a tensor or array; InvalidArgumentError when ferry cannot reduce it."""
    if _torch(obj) is not None:
        found = _TORCH_DTYPES.get(str(obj.dtype))
        if found is None:
            raise InvalidArgumentError(
                f"{name} has dtype {obj.dtype}, which ferry cannot reduce; supported: "
                "uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64")
        return found
    if _is_numpy(obj):
        dt = obj.dtype
        found = _NUMPY_DTYPES.get((dt.kind, dt.itemsize))
        if found is None or not dt.isnative:
            why = "non-native byte order" if found is not None else "a dtype ferry cannot reduce"
            raise InvalidArgumentError(
                f"{name} has dtype {dt.str} ({why}); supported: native uint8..uint64, int8..int64, "
                "float16, float32, float64 (bfloat16 through torch)")
        return found
    raise _kind_error(name, obj)


class HostView:
    """One tensor's memory as a host pointer: the tensor itself, or a pinned staging copy of it."""

    def __init__(self, obj: Any, name: str, writable: bool, copy_in: bool) -> None:
        self.obj = obj
        self.stage: Optional[DeviceStage] = None  # a CUDA tensor's host copy, else None
        torch = _torch(obj)
        if torch is not None:
            if obj.layout != torch.strided:
                raise InvalidArgumentError(f"{name} is a {obj.layout} tensor; ferry reduces dense tensors")
            if not obj.is_contiguous():
                raise InvalidArgumentError(f"{name} is not contiguous; pass {name}.contiguous()")
            if obj.is_cuda:
                # Staged through host memory until ferry reduces on the device.
                self.stage = DeviceStage(obj, copy_in)
                self.ptr = self.stage.ptr
            elif obj.device.type == "cpu":
                self.ptr = obj.data_ptr()
            else:
                raise InvalidArgumentError(f"{name} is on device {obj.device}; ferry takes CPU and CUDA tensors")
            self.count = obj.numel()
        elif _is_numpy(obj):
            if not obj.flags.c_contiguous:
                raise InvalidArgumentError(f"{name} is not C-contiguous; pass numpy.ascontiguousarray({name})")
            if writable and not obj.flags.writeable:
                raise InvalidArgumentError(
                    f"{name} is read-only and would receive the result; pass a writable out= array")
            self.ptr = obj.ctypes.data
            self.count = obj.size
        else:
            raise _kind_error(name, obj)

    def wait_copied(self) -> None:
        """Blocks until a staged input is in host memory (ferry's copy event, not the caller's stream)."""
        if self.stage is not None:
            self.stage.wait_copied()

    def copy_back(self) -> List[Any]:
        """Enqueues a staged result's copy into the CUDA tensor on ferry's stream; returns the
        events to publish (none for host memory)."""
        return [] if self.stage is None else [self.stage.copy_back()]

    def release(self) -> None:
        """The library no longer borrows the staging buffer and nothing is copied back."""
        if self.stage is not None:
            self.stage.release()


def _shape(obj: Any) -> Tuple[int, ...]:
    return tuple(int(d) for d in obj.shape)


class ReducePlan:
    """Host pointers for one all-reduce, what to return, and what to keep alive until it ends.

    Holds references to the caller's tensors (and any staging copies) so that
    the memory the library borrows stays valid until :meth:`finish` or until
    the plan is dropped after the operation ended.
    """

    def __init__(self, tensor: Any, out: Optional[Any], name: str = "tensor") -> None:
        self.dtype = ferry_dtype(tensor, name)
        if out is None or out is tensor:
            view = HostView(tensor, name, writable=True, copy_in=True)
            self._send = self._recv = view
            self.result = tensor
        else:
            out_dtype = ferry_dtype(out, "out")
            if out_dtype != self.dtype:
                raise InvalidArgumentError(f"out has dtype {out.dtype} but {name} has {tensor.dtype}")
            if _shape(out) != _shape(tensor):
                raise InvalidArgumentError(f"out has shape {_shape(out)} but {name} has {_shape(tensor)}")
            self._send = HostView(tensor, name, writable=False, copy_in=True)
            self._recv = HostView(out, "out", writable=True, copy_in=False)
            self.result = out
        self.count = self._send.count
        self.send_ptr = self._send.ptr
        self.recv_ptr = self._recv.ptr
        self.on_device = self._send.stage is not None or self._recv.stage is not None

    def wait_copied(self) -> None:
        """Blocks until staged CUDA inputs are in host memory and a staged output buffer is
        free of earlier copies (call before the C call)."""
        self._send.wait_copied()
        if self._recv is not self._send:
            self._recv.wait_copied()

    def copy_back(self) -> List[Any]:
        """After success: enqueues the staged CUDA result's copy back on ferry's stream and lets
        go of the staging buffers; returns the events for publish()."""
        events = self._recv.copy_back()
        self.release()
        return events

    def release(self) -> None:
        """After the library let go of the buffers: staging buffers back to the pool."""
        self._send.release()
        self._recv.release()

    def finish(self) -> Any:
        """After success, on the caller's thread: copies staged CUDA results back and makes the
        caller's current stream wait for that copy; returns the output tensor."""
        publish(self.copy_back())
        return self.result


def plan_allreduce(tensor: Any, out: Optional[Any] = None, name: str = "tensor") -> ReducePlan:
    """Validates ``tensor`` (and ``out``) and returns the buffers to hand to libferry.

    Raises InvalidArgumentError (a ValueError) for: an object that is neither a
    torch.Tensor nor a numpy.ndarray, an unsupported dtype, a non-contiguous
    buffer, a read-only array that would receive the result, a tensor on a
    device other than CPU/CUDA, and an ``out`` whose dtype or shape differs.
    """
    return ReducePlan(tensor, out, name)


def plan_many(tensors: Sequence[Any], outs: Optional[Sequence[Any]]) -> List[ReducePlan]:
    """plan_allreduce for each tensor (``outs`` None, or one out per tensor)."""
    if outs is not None and len(outs) != len(tensors):
        raise InvalidArgumentError(f"outs has {len(outs)} entries for {len(tensors)} tensors")
    return [ReducePlan(t, None if outs is None else outs[i], f"tensors[{i}]") for i, t in enumerate(tensors)]

