"""A model's buffers (BatchNorm's running statistics and counters: state that is not a
parameter and that no optimizer touches) kept equal across DiLoCo's peers.

At every outer step they travel beside the pseudo-gradient, in the same reduction:

- floating-point buffers: the weighted mean of every peer's values (the weights are the
  pseudo-gradient's, so a peer that contributed nothing adds nothing), one flat tensor per
  dtype, in full precision whatever the pseudo-gradient's quantization;
- integer buffers (``num_batches_tracked``): the group leader's (ring rank 0's) values: a
  mean of counters is no counter, and the leader's is one that some peer really counted.

Afterwards every peer holds the same bits. Between outer steps each peer's buffers follow
its own data, as its local copy of the parameters does. Nothing here communicates.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

import torch

from .errors import InvalidArgumentError

__all__ = ["ModuleBuffers"]

INTEGER = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


class ModuleBuffers:
    """The buffers of ``model`` (those in its state_dict), grouped for the reduction: one
    flat tensor per float dtype (means), then one per integer dtype (the leader's)."""

    def __init__(self, model: torch.nn.Module, device: torch.device) -> None:
        persistent = set(model.state_dict().keys())
        named = [(n, b) for n, b in model.named_buffers() if n in persistent]
        self.device = device
        self.means: List[List[torch.Tensor]] = []
        self.counters: List[List[torch.Tensor]] = []
        self.names: Dict[str, str] = {}  # shared-state name -> what it is, for error messages
        by_dtype: Dict[torch.dtype, List[torch.Tensor]] = {}
        for name, b in named:
            if not (b.is_floating_point() or b.dtype in INTEGER):
                raise InvalidArgumentError(f"DiLoCo cannot sync module buffer '{name}' of dtype {b.dtype} "
                                           "(float and integer buffers only); pass sync_buffers=False")
            by_dtype.setdefault(b.dtype, []).append(b)
        for dtype, group in by_dtype.items():
            (self.means if dtype.is_floating_point else self.counters).append(group)
        self.named = {f"buffer.{name}": b for name, b in named}
        for name, b in named:
            self.names[f"buffer.{name}"] = f"module buffer '{name}'"

    def __len__(self) -> int:
        return len(self.means) + len(self.counters)

    def inputs(self, weight: float) -> List[torch.Tensor]:
        """This peer's contribution: the float groups times ``weight``, the integer groups as
        they are (ElasticGroup sends them from the leader only). Fresh tensors (a retried
        reduction reuses them)."""
        flats = [torch.cat([b.detach().reshape(-1).to(self.device) for b in g]) for g in self.means + self.counters]
        for flat in flats[:len(self.means)]:
            flat.mul_(weight)
        return flats

    def zeros(self) -> List[torch.Tensor]:
        """A contribution of nothing (a newcomer's, weight 0), shaped as inputs() are."""
        return [torch.zeros(sum(b.numel() for b in g), dtype=g[0].dtype, device=self.device)
                for g in self.means + self.counters]

    def leader(self, first: int) -> List[int]:
        """The indices of the integer groups among a reduction's inputs, ours starting at ``first``."""
        return list(range(first + len(self.means), first + len(self)))

    @torch.no_grad()
    def load(self, results: Sequence[torch.Tensor], contributed: bool) -> None:
        """Sets the buffers to the reduction's results (means, then the leader's integers).
        ``contributed``: some peer had weight > 0; when none had, the means are zeros, not
        values, and the float buffers stay as they are."""
        for flats, groups in ((results[:len(self.means)], self.means), (results[len(self.means):], self.counters)):
            if groups is self.means and not contributed:
                continue
            for flat, group in zip(flats, groups):
                offset = 0
                for b in group:
                    b.copy_(flat[offset:offset + b.numel()].view_as(b))
                    offset += b.numel()
