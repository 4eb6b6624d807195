"""ferry's element types, reduction operators and quantization names (mirrors of ferry.h enums).

Pure Python; does not load libferry.
"""

from __future__ import annotations

import enum
from typing import Any, Optional, Union

from .errors import InvalidArgumentError

__all__ = ["DType", "ReduceOp", "QUANT_NAMES", "parse_op", "parse_quant"]


class DType(enum.IntEnum):
    """``ferry_dtype``: stable numbers, append only."""

    U8 = 0
    I8 = 1
    U16 = 2
    I16 = 3
    U32 = 4
    I32 = 5
    U64 = 6
    I64 = 7
    F16 = 8
    BF16 = 9
    F32 = 10
    F64 = 11

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _ITEMSIZE[self]


_ITEMSIZE = {
    DType.U8: 1, DType.I8: 1, DType.U16: 2, DType.I16: 2, DType.U32: 4, DType.I32: 4,
    DType.U64: 8, DType.I64: 8, DType.F16: 2, DType.BF16: 2, DType.F32: 4, DType.F64: 8,
}


class ReduceOp(enum.IntEnum):
    """``ferry_reduce_op``. Integers wrap for sum/avg/prod; avg divides once by the world size
    (integers truncate toward zero); f16/bf16 combine in f32; min/max propagate NaN."""

    SUM = 0
    AVG = 1
    PROD = 2
    MIN = 3
    MAX = 4


_OP_NAMES = {"sum": ReduceOp.SUM, "avg": ReduceOp.AVG, "mean": ReduceOp.AVG, "prod": ReduceOp.PROD,
             "product": ReduceOp.PROD, "min": ReduceOp.MIN, "max": ReduceOp.MAX}

#: Wire quantization names the Python API accepts (``quant=``), with their ``ferry_quant``
#: numbers (FERRY_QUANT_NONE = 0 is ``None``).
_QUANT_CODES = {"u8": 1, "i8": 2, "f16": 3, "bf16": 4, "u4": 5, "i8h": 6, "i4h": 7, "i8h-sr": 8, "i4h-sr": 9}
QUANT_NAMES = tuple(_QUANT_CODES)


def _torch_op_name(op: Any) -> Optional[str]:
    """The name of a ``torch.distributed.ReduceOp`` member ("sum", ...), "" for one ferry lacks
    (BAND, PREMUL_SUM, ...), None when ``op`` is not torch's. torch is only imported when the
    caller already passed one of its objects."""
    if not type(op).__module__.startswith("torch"):
        return None
    import torch.distributed as dist  # noqa: PLC0415 - only for torch users

    for torch_name, name in (("SUM", "sum"), ("AVG", "avg"), ("PRODUCT", "prod"), ("MIN", "min"), ("MAX", "max")):
        member = getattr(dist.ReduceOp, torch_name, None)
        if member is not None and op == member:
            return name
    return ""


def parse_op(op: Union[str, ReduceOp, int, Any]) -> ReduceOp:
    """``"sum" | "avg" | "mean" | "prod" | "min" | "max"`` (any case), a :class:`ReduceOp`, or
    ``torch.distributed.ReduceOp.SUM`` (``AVG``, ``PRODUCT``, ``MIN``, ``MAX``)."""
    torch_name = _torch_op_name(op)
    if torch_name == "":
        raise InvalidArgumentError("this torch.distributed.ReduceOp has no ferry equivalent; "
                                   "ferry reduces with sum, avg, prod, min or max")
    if torch_name is not None:
        op = torch_name
    if isinstance(op, str):
        found = _OP_NAMES.get(op.lower())
        if found is None:
            raise InvalidArgumentError(f"unknown reduce op {op!r}; expected one of sum, avg, prod, min, max")
        return found
    try:
        return ReduceOp(op)
    except ValueError:
        raise InvalidArgumentError(f"unknown reduce op {op!r}") from None


def parse_quant(quant: Optional[str]) -> int:
    """``quant=`` to its ``ferry_quant`` number: None (full precision, 0) or one of
    :data:`QUANT_NAMES` (any case). Anything else is refused with :class:`InvalidArgumentError`
    (a ``ValueError``). Whether the dtype can take it is the library's check (ferry.h)."""
    if quant is None:
        return 0
    code = _QUANT_CODES.get(quant.lower()) if isinstance(quant, str) else None
    if code is None:
        raise InvalidArgumentError(f"unknown quantization {quant!r}; expected None or one of {', '.join(QUANT_NAMES)}")
    return code
