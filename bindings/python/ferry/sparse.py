"""The sparse codec (ferry.h, "Sparse contributions"): a pseudo-gradient as the top-k entries
of each chunk, their values at 2, 4 or 8 bits, and the error-feedback residual of what was
not sent. SparseLoCo's outer step (``ferry.diloco``, ``sparse=``) sends these through
``Communicator.all_gather`` and sums them with :func:`decode_sum`; the functions are public
for a caller who builds its own scheme.

Inputs are contiguous CPU torch tensors or C-contiguous NumPy arrays (the codec runs on the
CPU); the calls are pure and release the GIL. Encoding is a pure function of the input's
bits and the spec, and :func:`decode_sum` of the same parts gives the same bits on every peer.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from . import _lib
from .dtypes import DType
from .errors import InvalidArgumentError
from .tensors import ferry_dtype

__all__ = ["SparseSpec", "encode", "decode_sum"]

_ENCODABLE = (DType.F32, DType.BF16, DType.F16)


@dataclass(frozen=True)
class SparseSpec:
    """How a contribution is cut: ``chunk`` elements a chunk (1..65536; the paper's 4096),
    ``density`` of each chunk sent (0 < density <= 1: k = round(density x chunk), at least 1),
    ``bits`` a value (2, 4 or 8)."""

    chunk: int = 4096
    density: float = 0.02
    bits: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.chunk, int) or not 1 <= self.chunk <= 65536:
            raise InvalidArgumentError(f"chunk must be an int in 1..65536, got {self.chunk!r}")
        if not isinstance(self.density, (int, float)) or not 0 < self.density <= 1:
            raise InvalidArgumentError(f"density must be in (0, 1], got {self.density!r}")
        if self.bits not in (2, 4, 8):
            raise InvalidArgumentError(f"bits must be 2, 4 or 8, got {self.bits!r}")

    @property
    def k(self) -> int:
        """Entries sent a chunk."""
        return int(_lib.lib().ferry_sparse_k_for_density(self.chunk, float(self.density)))

    def c_spec(self) -> "_lib.SparseSpecC":
        spec = _lib.defaults(_lib.SparseSpecC, "ferry_sparse_spec_init")
        spec.chunk, spec.k, spec.bits = self.chunk, self.k, self.bits
        return spec

    def max_bytes(self, count: int) -> int:
        """The most bytes a contribution of ``count`` elements takes."""
        out = ctypes.c_size_t(0)
        _lib.check(_lib.lib().ferry_sparse_max_bytes(ctypes.byref(self.c_spec()), count, ctypes.byref(out)),
                   "sparse max_bytes")
        return out.value


def _cpu_buffer(obj: Any, name: str, writable: bool) -> "tuple[int, int, DType]":
    """(address, element count, dtype) of a contiguous CPU tensor or C-contiguous array."""
    dtype = ferry_dtype(obj, name)
    if hasattr(obj, "data_ptr"):  # torch
        if obj.device.type != "cpu" or not obj.is_contiguous():
            raise InvalidArgumentError(f"{name} must be a contiguous CPU tensor (the codec runs on the CPU)")
        return obj.data_ptr(), obj.numel(), dtype
    if not obj.flags["C_CONTIGUOUS"] or (writable and not obj.flags["WRITEABLE"]):
        raise InvalidArgumentError(f"{name} must be a C-contiguous{' writable' if writable else ''} array")
    return obj.ctypes.data, obj.size, dtype


def encode(x: Any, spec: SparseSpec, residual: Optional[Any] = None) -> bytes:
    """x's contribution (x: float32, bfloat16 or float16). ``residual``, when given, a float32
    buffer of x's size, receives x minus what :func:`decode_sum` makes of this contribution
    alone; it may be x itself (float32): then only the sent entries change, which is the
    error-feedback accumulator's update."""
    ptr, count, dtype = _cpu_buffer(x, "x", writable=False)
    if dtype not in _ENCODABLE:
        raise InvalidArgumentError(f"x has dtype {dtype.name}; the sparse codec encodes float32, bfloat16, float16")
    res_ptr = None
    if residual is not None:
        res_ptr, res_count, res_dtype = _cpu_buffer(residual, "residual", writable=True)
        if res_dtype != DType.F32 or res_count != count:
            raise InvalidArgumentError(f"residual must be float32 with x's {count} elements")
    capacity = spec.max_bytes(count)
    out = (ctypes.c_char * max(capacity, 1))()
    written = ctypes.c_size_t(0)
    _lib.check(_lib.lib().ferry_sparse_encode(ctypes.byref(spec.c_spec()), int(dtype), ptr, count, out, capacity,
                                              ctypes.byref(written), res_ptr), "sparse encode")
    return ctypes.string_at(out, written.value)


def decode_sum(parts: Sequence[bytes], out: Any) -> Any:
    """Writes the sum of ``parts`` (rank r's at index r; an empty one sends nothing) into
    ``out``, a float32 buffer of the contributions' element count, folded in rank order: the
    same bits on every peer. Returns ``out``. A malformed part raises ProtocolError naming
    its rank, and ``out`` is left as it was."""
    ptr, count, dtype = _cpu_buffer(out, "out", writable=True)
    if dtype != DType.F32:
        raise InvalidArgumentError(f"out must be float32, not {dtype.name}")
    keep = [bytes(p) for p in parts]
    data = (ctypes.c_void_p * max(len(keep), 1))(*[ctypes.cast(ctypes.c_char_p(p), ctypes.c_void_p) for p in keep])
    sizes = (ctypes.c_size_t * max(len(keep), 1))(*[len(p) for p in keep])
    _lib.check(_lib.lib().ferry_sparse_decode_sum(data, sizes, len(keep), ptr, count), "sparse decode_sum")
    return out
