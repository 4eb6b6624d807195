"""The outer side of DiLoCo for the examples: ferry.diloco's OuterOptimizer (the synchronized
copy of (part of) the model and its outer Nesterov SGD), plus the weights hash they print."""

from __future__ import annotations

from ferry.diloco import OuterOptimizer as _OuterOptimizer
from ferry.diloco import split_flat
from task import content_hash

__all__ = ["OuterOptimizer", "split_flat"]


class OuterOptimizer(_OuterOptimizer):
    """ferry.diloco.OuterOptimizer with the hash of its weights the examples print."""

    def hash(self) -> str:
        return content_hash(self.params)
