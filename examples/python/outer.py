"""The outer side of DiLoCo: the synchronized copy of (part of) the model, and the outer
Nesterov SGD that applies averaged pseudo-gradients to it."""

from __future__ import annotations

from typing import Dict, List, Sequence

import torch

from task import content_hash


class OuterOptimizer:
    """Outer parameters (identical on every peer) and their Nesterov SGD.

    The momentum buffers exist from the start (zeros: torch's SGD then does exactly what it
    does on a first step), so a newcomer can receive them through a shared-state sync before
    its first outer step.
    """

    def __init__(self, params: Sequence[torch.Tensor], lr: float, momentum: float, prefix: str = "outer") -> None:
        self.params = [p.detach().clone() for p in params]
        self.optimizer = torch.optim.SGD(self.params, lr=lr, momentum=momentum, nesterov=momentum > 0)
        self.buffers = []
        for p in self.params:
            buf = torch.zeros_like(p)
            self.optimizer.state[p]["momentum_buffer"] = buf
            self.buffers.append(buf)
        self.prefix = prefix

    def shared(self) -> Dict[str, torch.Tensor]:
        """The tensors a newcomer needs, by name (for ElasticGroup)."""
        named = {f"{self.prefix}.param.{i}": p for i, p in enumerate(self.params)}
        if self.optimizer.defaults["momentum"] > 0:
            named.update({f"{self.prefix}.momentum.{i}": b for i, b in enumerate(self.buffers)})
        return named

    def numel(self) -> int:
        return sum(p.numel() for p in self.params)

    def pseudo_gradient(self, local: Sequence[torch.Tensor]) -> torch.Tensor:
        """outer - local, flattened into one tensor (one all-reduce per outer step)."""
        return torch.cat([(o - p.detach()).reshape(-1) for o, p in zip(self.params, local)])

    def step(self, flat_gradient: torch.Tensor) -> None:
        """One outer step with the averaged pseudo-gradient (flattened as pseudo_gradient made it)."""
        for p, g in zip(self.params, split_flat(flat_gradient, self.params)):
            p.grad = g
        self.optimizer.step()

    @torch.no_grad()
    def load_into(self, local: Sequence[torch.Tensor]) -> None:
        for o, p in zip(self.params, local):
            p.copy_(o)

    def hash(self) -> str:
        return content_hash(self.params)


def split_flat(flat: torch.Tensor, like: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Views of `flat` shaped like each tensor of `like`, in order."""
    out, offset = [], 0
    for t in like:
        out.append(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return out
