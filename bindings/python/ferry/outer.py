"""The outer side of DiLoCo (PyTorch): the outer parameters and their Nesterov SGD, and the
fragments Streaming DiLoCo splits them into. ``ferry.diloco`` drives them over the network;
nothing here communicates."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Union

import torch

from .errors import InvalidArgumentError

__all__ = ["Fragment", "OuterOptimizer", "fragment_parameters", "split_flat"]

MERGES = ("progress", "mix")


class OuterOptimizer:
    """Outer parameters (identical on every peer) and their SGD with Nesterov momentum.

    The momentum buffers exist from the start (zeros: torch's SGD then does exactly what it
    does on a first step), so a newcomer can receive them through a shared-state sync before
    its first outer step.

    ``device``: where the outer parameters and the momentum live (None: each parameter's
    own device); the pseudo-gradient is formed there, and the model's copy is updated
    from there.
    """

    def __init__(self, params: Sequence[torch.Tensor], lr: float, momentum: float, prefix: str = "outer",
                 device: Optional[torch.device] = None) -> None:
        self.params = [p.detach().to(device, copy=True) for p in params]
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
        return torch.cat([(o - p.detach().to(o.device)).reshape(-1) for o, p in zip(self.params, local)])

    def step(self, flat_gradient: torch.Tensor) -> None:
        """One outer step with the averaged pseudo-gradient (flattened as pseudo_gradient made it)."""
        for p, g in zip(self.params, split_flat(flat_gradient, self.params)):
            p.grad = g
        self.optimizer.step()

    @torch.no_grad()
    def load_into(self, local: Sequence[torch.Tensor]) -> None:
        for o, p in zip(self.params, local):
            p.copy_(o)


def split_flat(flat: torch.Tensor, like: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Views of `flat` shaped like each tensor of `like`, in order."""
    out, offset = [], 0
    for t in like:
        out.append(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return out


class Fragment:
    """Some of the model's parameters (whole layers), their outer optimizer, and the local
    values when their pseudo-gradient was last issued (what the "progress" merge adds to)."""

    def __init__(self, params: List[torch.nn.Parameter], lr: float, momentum: float, prefix: str,
                 device: Optional[torch.device] = None) -> None:
        self.params = params
        self.outer = OuterOptimizer(params, lr, momentum, prefix, device)
        self.issued: Optional[List[torch.Tensor]] = None

    def snapshot(self) -> None:
        self.issued = [p.detach().clone() for p in self.params]

    def reset(self) -> None:
        """The local copy restarts from the outer weights (no local progress)."""
        self.outer.load_into(self.params)
        self.snapshot()

    @torch.no_grad()
    def merge(self, rule: str, alpha: float) -> None:
        """After a late outer step: bring the local copy to the new outer weights, keeping some
        of what it learnt while the reduction ran."""
        for p, o, issued in zip(self.params, self.outer.params, self.issued):
            o = o.to(p.device)  # the outer weights may live elsewhere (DiLoCo's outer_device)
            if rule == "mix":
                p.mul_(alpha).add_(o, alpha=1 - alpha)
            else:  # "progress": the new outer weights plus the local progress since the issue
                p.sub_(issued).add_(o)


def layers_of(model: torch.nn.Module) -> List[List[torch.nn.Parameter]]:
    """The model's parameters grouped by top-level module (a parameter of the model itself is
    a group of its own), in the model's order."""
    groups: List[List[torch.nn.Parameter]] = []
    last = None
    for name, p in model.named_parameters():
        key = name.split(".")[0]
        if key != last:
            groups.append([])
            last = key
        groups[-1].append(p)
    return groups


def fragment_parameters(model: torch.nn.Module,
                        fragments: Union[int, Sequence[Sequence[torch.nn.Parameter]]]) -> List[List[torch.nn.Parameter]]:
    """The parameter lists of the fragments: ``fragments`` given as lists (each parameter in
    exactly one), or a count F: the model's top-level layers cut into F runs of consecutive
    layers, as even as possible (the first ones one layer longer)."""
    params = list(model.parameters())
    if not isinstance(fragments, int):
        lists = [list(f) for f in fragments]
        given = [id(p) for f in lists for p in f]
        if not lists or any(not f for f in lists) or sorted(given) != sorted(id(p) for p in params):
            raise InvalidArgumentError("fragments must be non-empty lists holding each model parameter once")
        return lists
    layers = layers_of(model)
    if not 1 <= fragments <= len(layers):
        raise InvalidArgumentError(f"fragments must be 1..{len(layers)} (the model's top-level layers), "
                                   f"got {fragments!r}")
    base, extra = divmod(len(layers), fragments)
    out, start = [], 0
    for i in range(fragments):
        end = start + base + (1 if i < extra else 0)
        out.append([p for layer in layers[start:end] for p in layer])
        start = end
    return out
