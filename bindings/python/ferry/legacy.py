"""The Python API's old call forms, kept working for one minor version with a DeprecationWarning.

After 0.3 every parameter after a call's operands became keyword-only, every duration is in
seconds (a float, or a ``datetime.timedelta``), and a few things were renamed (CHANGELOG.md,
0.4.0, lists each). A call in a 0.3 form still does what it did and warns (Python shows
a DeprecationWarning once per call site in ``__main__`` and under pytest); 0.5 drops them.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, TypeVar

__all__ = ["MARK", "legacy_call", "warn_deprecated"]

#: ends every message (the tests turn warnings carrying it into errors)
MARK = "[ferry: a deprecated form of 0.3, kept for one minor version]"

F = TypeVar("F", bound=Callable[..., Any])
#: old keyword -> (new keyword, conversion of the old value to the new one, or None)
Renamed = Dict[str, Tuple[str, Optional[Callable[[Any], Any]]]]


def warn_deprecated(message: str, stacklevel: int = 3) -> None:
    """A DeprecationWarning at the caller of the function that calls this (stacklevel 3)."""
    warnings.warn(f"{message} {MARK}", DeprecationWarning, stacklevel=stacklevel)


def legacy_call(positional: Sequence[str] = (), renamed: Optional[Renamed] = None) -> Callable[[F], F]:
    """Decorates a function whose parameters after its positional ones became keyword-only.

    ``positional``: the old order of the parameters that followed (old names allowed): a call
    passing them positionally still works, with a warning. ``renamed``: old keywords and what
    they became (their values converted, e.g. milliseconds to seconds). ``inspect.signature``
    shows the new signature.
    """

    def wrap(fn: F) -> F:
        method = "." in fn.__qualname__
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        first = sum(p.kind in kinds for p in inspect.signature(fn).parameters.values())
        old = dict(renamed or {})

        def name_for(args: Tuple[Any, ...]) -> str:
            """As the caller knows it: a constructor by its class, a mixin's method by the class used."""
            if not method:
                return fn.__qualname__
            cls = type(args[0]).__name__
            return cls if fn.__name__ == "__init__" else f"{cls}.{fn.__name__}"

        def translate(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Any, ...]:
            """The old form's arguments in the new form (kwargs updated in place), with warnings."""
            name = name_for(args)
            if len(args) > first:
                extra = args[first:]
                if len(extra) > len(positional):
                    shown = first - 1 if method else first  # a method's self is not counted
                    raise TypeError(f"{name}() takes {shown} positional argument(s) (and {len(positional)} "
                                    f"more, deprecated), {shown + len(extra)} given")
                names = positional[:len(extra)]
                for key, value in zip(names, extra):
                    if key in kwargs:
                        raise TypeError(f"{name}() got multiple values for argument {key!r}")
                    kwargs[key] = value
                warn_deprecated(f"{name}(): pass {', '.join(names)} by keyword", stacklevel=4)
                args = args[:first]
            for key in [k for k in kwargs if k in old]:
                new, convert = old[key]
                if new in kwargs:
                    raise TypeError(f"{name}() got both {key}= (deprecated) and {new}=")
                value = kwargs.pop(key)
                kwargs[new] = value if convert is None or value is None else convert(value)
                warn_deprecated(f"{name}({key}=...) is now {new}=..." + (" in seconds" if convert else ""),
                                stacklevel=4)
            return args

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if len(args) > first or (old and not old.keys().isdisjoint(kwargs)):
                args = translate(args, kwargs)
            return fn(*args, **kwargs)

        return call  # type: ignore[return-value]

    return wrap
