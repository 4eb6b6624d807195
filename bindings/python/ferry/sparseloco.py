"""SparseLoCo's side of DiLoCo (Sarfi et al., arXiv 2508.15706): a per-peer error-feedback
accumulator takes the place of the outer momentum, and each outer step sends only its
chunk-wise top-k at a few bits, as an all-gather (sparse contributions do not add along a
ring). ``ferry.diloco.DiLoCo(sparse=SparseLoCo(...))`` drives it; nothing here communicates.

Per fragment and outer step, on every peer r (w_r its weight; 1 for a peer that trained):

    e_r   = decay * e_r + w_r * delta_r      # delta_r = theta - local_r, as in DiLoCo
    c_r   = Q(TopK(e_r))                     # ferry.sparse.encode: what is sent
    e_r   = e_r - c_r                        # the residual stays here
    delta = sum_r c_r / sum_r w_r            # every peer decodes the same parts: the same bits
    theta = theta - lr * delta               # plain SGD: no outer momentum

The accumulator is this peer's alone: it is never shared, a newcomer starts with zeros, and
``DiLoCo.state_dict()`` holds it. It lives in host memory in float32 (the codec runs on the
CPU), whatever the model's dtype and device. Encoding happens once per sync point: a retry
after a peer loss gathers the same bytes again, so the accumulator changes once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

import torch

from .errors import InvalidArgumentError
from .sparse import SparseSpec, encode

__all__ = ["SparseContribution", "ErrorFeedback", "SparseLoCo"]


@dataclass(frozen=True)
class SparseLoCo:
    """SparseLoCo's options: ``density`` of each chunk sent (the paper: 1-3 %), chunks of at
    most ``chunk`` elements (the paper: 4096), ``bits`` a value (2, 4 or 8; the paper: 2), the
    accumulator's ``decay`` (beta). A fragment of n elements is cut into ceil(n / chunk)
    chunks of equal length (:meth:`spec_for`), so every chunk sends the same share: a short
    last chunk would send k of fewer elements. The defaults are the best of
    tools/diloco-bench's sweep (docs/diloco.md): 2.1 % of chunks up to 32768, whose scale pair
    costs an eighth of 4096's per entry sent, and decay 0.7 (0.9, the paper's range, ends
    about 1 % higher in a 12-step run)."""

    density: float = 0.021
    chunk: int = 32768
    bits: int = 2
    decay: float = 0.7

    def __post_init__(self) -> None:
        if not isinstance(self.decay, (int, float)) or not 0 <= self.decay <= 1:
            raise InvalidArgumentError(f"decay must be in [0, 1], got {self.decay!r}")
        self.spec  # checks chunk, density and bits

    @property
    def spec(self) -> SparseSpec:
        """The options as a codec spec with the longest chunk: what a fragment of a multiple of
        ``chunk`` elements is encoded with. Any other fragment's is :meth:`spec_for`'s."""
        return SparseSpec(chunk=self.chunk, density=self.density, bits=self.bits)

    def spec_for(self, numel: int) -> SparseSpec:
        """The codec's spec for a fragment of ``numel`` elements: ceil(numel / chunk) chunks of
        ceil(numel / count) elements (the last up to count - 1 shorter)."""
        count = max(1, -(-numel // self.chunk))
        return SparseSpec(chunk=max(1, -(-numel // count)), density=self.density, bits=self.bits)


class SparseContribution:
    """One peer's encoded share of a reduction, and what its result looks like: ElasticGroup
    all-gathers ``data`` and sums every peer's into a tensor of ``numel`` elements of the
    given dtype and device. Immutable: a retry sends the same bytes (``clone()`` is itself)."""

    def __init__(self, data: bytes, numel: int, dtype: torch.dtype, device: torch.device) -> None:
        self.data, self.numel, self.dtype, self.device = data, numel, dtype, device

    def clone(self) -> "SparseContribution":
        return self

    def empty_output(self) -> torch.Tensor:
        return torch.empty(self.numel, dtype=self.dtype, device=self.device)


class ErrorFeedback:
    """One fragment's accumulator e (float32, host memory) and the encoding of its top-k."""

    def __init__(self, numel: int, options: SparseLoCo) -> None:
        self.options = options
        self.spec = options.spec_for(numel)
        self.accumulator = torch.zeros(numel, dtype=torch.float32)

    def contribute(self, delta: torch.Tensor, weight: float) -> SparseContribution:
        """Folds ``weight * delta`` into e, sends e's top-k and keeps the rest; weight 0 (a
        newcomer, or a peer below min_work) sends nothing and leaves e as it was."""
        if not weight:
            return self.nothing(delta.numel(), delta.dtype, delta.device)
        e = self.accumulator
        e.mul_(self.options.decay).add_(delta.detach().to("cpu", torch.float32), alpha=float(weight))
        return SparseContribution(encode(e, self.spec, residual=e), delta.numel(), delta.dtype, delta.device)

    def nothing(self, numel: int, dtype: torch.dtype, device: torch.device) -> SparseContribution:
        """The contribution of a peer that trained nothing (weight 0)."""
        return SparseContribution(b"", numel, dtype, device)

    def reset(self) -> None:
        self.accumulator.zero_()

    def state(self) -> Dict[str, Any]:
        return {"accumulator": self.accumulator.clone()}

    def load(self, state: Dict[str, Any]) -> None:
        if state["accumulator"].shape != self.accumulator.shape:
            raise InvalidArgumentError("state_dict's SparseLoCo accumulator does not match this model's fragment")
        self.accumulator.copy_(state["accumulator"])
