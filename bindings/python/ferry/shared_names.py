"""What DiLoCo's shared tensors are, in the model's words, for the messages that name them.

The master compares the peers' shared state by name, dtype number and length, and says
"'outer.momentum.0' (dtype 10, 64 elements)" when two peers differ: a fact about ferry's
bookkeeping, not about the user's model. DiLoCo rewrites such a MismatchError to name the
parameter (or buffer), its shape and its dtype by name, keeping the shared name beside it.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Dict, Iterator, Optional, Sequence

import torch

from .dtypes import DType
from .errors import MismatchError

__all__ = ["describe_shared", "naming_mismatches"]

DIGEST = re.compile(r"'([^']+)' \(dtype (\d+), (\d+) elements")
# ferry's dtype numbers by torch's names (the master reports numbers: DType)
TORCH_NAMES = {"U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16", "U32": "uint32", "I32": "int32",
               "U64": "uint64", "I64": "int64", "F16": "float16", "BF16": "bfloat16", "F32": "float32",
               "F64": "float64"}


def describe_shared(model: torch.nn.Module, fragments: Sequence, buffers: Optional[Dict[str, str]]) -> Dict[str, str]:
    """Shared-state name -> what it is: every fragment's outer copy and momentum of each
    parameter, and the buffers' descriptions (ModuleBuffers.names)."""
    names = {id(p): n for n, p in model.named_parameters()}
    out = dict(buffers or {})
    for f in fragments:
        for i, p in enumerate(f.params):
            what = f"parameter '{names.get(id(p), '?')}'"
            out[f"{f.outer.prefix}.param.{i}"] = f"the outer copy of {what}"
            out[f"{f.outer.prefix}.momentum.{i}"] = f"the outer momentum of {what}"
    return out


def rename(message: str, names: Dict[str, str]) -> str:
    def one(m: "re.Match[str]") -> str:
        name, code, count = m.group(1), int(m.group(2)), m.group(3)
        try:
            dtype = TORCH_NAMES[DType(code).name]
        except ValueError:
            dtype = f"dtype {code}"
        mine = names.get(name)
        return f"{mine} ('{name}': {dtype}, {count} elements" if mine else f"'{name}' ({dtype}, {count} elements"

    return (DIGEST.sub(one, message) + "; every peer must train the same model (parameters, buffers, dtypes) "
            "with the same DiLoCo options")


@contextmanager
def naming_mismatches(names: Dict[str, str]) -> Iterator[None]:
    """Re-raises a MismatchError from the block with the model's names (module docstring)."""
    try:
        yield
    except MismatchError as e:
        raise MismatchError(rename(str(e), names)) from e
