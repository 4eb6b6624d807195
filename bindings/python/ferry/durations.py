"""Durations in the Python API: seconds as a float (or int), or a ``datetime.timedelta``.

The C API counts milliseconds in uint32 fields; conversion happens here, once, with the
checks ctypes would not make (a negative or NaN duration, one past the field's range).
"""

from __future__ import annotations

import datetime
import math
from typing import Any, Optional, Union

from .errors import InvalidArgumentError

__all__ = ["Duration", "seconds", "millis", "from_millis"]

Duration = Union[float, int, datetime.timedelta]


def seconds(name: str, value: Any, most: Optional[float] = None, positive: bool = False) -> float:
    """``value`` (seconds, or a timedelta) as float seconds; InvalidArgumentError unless it is a
    finite number >= 0 (> 0 when ``positive``) and at most ``most``."""
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    elif not isinstance(value, (int, float)) or isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be seconds (a float) or a datetime.timedelta, got {value!r}")
    value = float(value)
    low_ok = value > 0 if positive else value >= 0
    if not math.isfinite(value) or not low_ok or (most is not None and value > most):
        bounds = f"({'0' if positive else '[0'}, {most:g}]" if most is not None else ("> 0" if positive else ">= 0")
        raise InvalidArgumentError(f"{name} must be seconds in {bounds}, got {value!r}")
    return value


def millis(name: str, value: Any, most: float = (2 ** 32 - 1) / 1000, positive: bool = False) -> int:
    """``value`` as whole milliseconds for a C field: rounded, and never rounded down to 0
    from a positive duration (0 often means "no wait" or "the default" in ferry.h)."""
    s = seconds(name, value, most, positive)
    return max(1, round(s * 1000)) if s > 0 else 0


def from_millis(value: Any) -> Any:
    """An old ``*_ms=`` value as seconds (anything else is passed on, for the check to refuse)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value / 1000
    return value
