"""DiLoCo as a library: wrap a model, its inner optimizer and a Communicator, call
``step()`` after every inner optimizer step.

The algorithm (DiLoCo, Douillard et al., arXiv 2311.08105): every peer keeps the *outer*
parameters theta (identical on every peer) and trains a local copy with its own inner
optimizer (AdamW in the paper). Every H = ``sync_every`` inner steps:

    delta_i = theta - local_i                 # this peer's pseudo-gradient
    delta   = sum_i w_i delta_i / sum_i w_i   # one all-reduce (optionally quantized)
    b       = momentum * b + delta            # outer SGD with Nesterov momentum
    theta   = theta - lr * (delta + momentum * b)
    local_i = theta                           # every peer restarts from the new theta

``w_i`` is 1 for a peer that trained the interval and 0 for one admitted during the
reduction (it has nothing to contribute), so the mean divides by the peers that trained.

What ferry adds (the protocol is ``ferry.elastic``'s; the examples use the same one):

- **Newcomers** connect at any time; the group admits them at the next boundary (right
  after an outer step) and hands them theta, the momentum buffers and the step through a
  shared-state sync (receive-only); or, when they arrive during a reduction, they join it
  with weight 0. Their first inner step then starts from theta.
- **Peer loss**: when the outer all-reduce fails (PeerLostError, TimeoutError) every
  survivor votes a new ring and reduces the same pseudo-gradients again; theta and the
  momentum change only once a reduction has fully succeeded, so an update is never half
  applied and every survivor ends each outer step with bit-identical theta.
- ``quant=`` ("u8", "i8", "u4", "f16", "bf16") quantizes the pseudo-gradient on the wire;
  the result is still bit-identical on every peer.

Differences from torchft's ``DiLoCo``/``LocalSGD`` (context managers that hook the inner
optimizer's ``step`` and take a user-built outer optimizer):

- ``step()`` is called explicitly (one line after ``inner_optimizer.step()``): optimizer
  step hooks need torch >= 2.0, and the call that may block on the network stays visible.
  ``with DiLoCo(...) as d`` is supported too (it joins the run on entry).
- The outer optimizer is built here (SGD, Nesterov): its momentum buffers must exist from
  the start so that a newcomer can receive them before its first outer step.
- A failed outer step is retried in the re-formed group, not discarded.
- ``state_dict()`` holds theta, the momentum, the counters, the model and the inner
  optimizer: everything one peer needs to resume bit-identically.

Not here yet (issue 20): Streaming DiLoCo's fragments (arXiv 2501.18512: F fragments synced
on a staggered schedule) and the overlapped outer step (the all-reduce of step t running
during the inner steps of t+1, merged as "progress" or Streaming DiLoCo's "mix"); the
examples ``async_diloco.py`` and ``streaming_diloco.py`` still carry them (overlapped.py).

Threads: one DiLoCo object belongs to one training thread; it makes collective calls on
its Communicator, which no other code may use for collectives meanwhile.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

import torch

from .communicator import Communicator
from .elastic import REDUCE, ElasticGroup
from .errors import InvalidArgumentError, InvalidUsageError

__all__ = ["DiLoCo", "OuterOptimizer", "split_flat"]


class OuterOptimizer:
    """Outer parameters (identical on every peer) and their SGD with Nesterov momentum.

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


def split_flat(flat: torch.Tensor, like: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Views of `flat` shaped like each tensor of `like`, in order."""
    out, offset = [], 0
    for t in like:
        out.append(flat[offset:offset + t.numel()].view_as(t))
        offset += t.numel()
    return out


class DiLoCo:
    """DiLoCo over a ferry Communicator, driven by one ``step()`` per inner step.

    Args:
        comm: a Communicator **not yet connected**: :meth:`join` connects it.
        model: the module being trained (its parameters are the local copy).
        inner_optimizer: the optimizer the caller steps (AdamW in the paper); it is only
            saved and restored here (its state stays local, as in DiLoCo).
        sync_every: H, inner steps per outer step (the paper: 500).
        outer_lr: the outer SGD's learning rate (the paper: 0.7).
        outer_momentum: its Nesterov momentum (the paper: 0.9); 0 for plain SGD (the
            momentum then is not shared).
        quant: wire quantization of the pseudo-gradient all-reduce (None: full precision).
        min_peers: before the first outer interval, wait until the group has this many.
        log: where membership events go, one line each (default: nowhere).

    Raises InvalidArgumentError for bad options or a model whose parameters do not share one
    dtype and device (the pseudo-gradient travels as one flat tensor). ``step()`` and
    ``join()`` raise what the Communicator raises that is not retryable (MasterLostError,
    KickedError, MismatchError, ...); retryable errors are handled inside.

    Every peer must run the same number of outer steps; a peer that stops early is a lost
    peer to the others.
    """

    def __init__(self, comm: Communicator, model: torch.nn.Module, inner_optimizer: torch.optim.Optimizer,
                 sync_every: int, outer_lr: float = 0.7, outer_momentum: float = 0.9,
                 quant: Optional[str] = None, min_peers: int = 1,
                 log: Optional[Callable[[str], None]] = None) -> None:
        if not isinstance(sync_every, int) or sync_every < 1:
            raise InvalidArgumentError(f"sync_every must be a positive int, got {sync_every!r}")
        if outer_lr <= 0 or not 0 <= outer_momentum < 1:
            raise InvalidArgumentError(f"need outer_lr > 0 and 0 <= outer_momentum < 1, got {outer_lr}, {outer_momentum}")
        self.comm = comm
        self.model = model
        self.inner_optimizer = inner_optimizer
        self.sync_every = sync_every
        self.quant = quant
        self.min_peers = min_peers
        self.params = list(model.parameters())
        if not self.params or len({(p.dtype, p.device) for p in self.params}) != 1:
            # One flat pseudo-gradient, one all-reduce per outer step: one dtype, one device.
            raise InvalidArgumentError("DiLoCo needs a model whose parameters share one dtype and device")
        self.outer = OuterOptimizer(self.params, outer_lr, outer_momentum)
        self.group = ElasticGroup(comm, self.outer.shared(), log or (lambda _: None))
        self.outer_step = 0  # outer steps completed
        self.inner_step = 0  # inner steps since the last outer step
        self.joined = False

    # ------------------------------------------------------------------ lifecycle

    def join(self) -> None:
        """Connects and takes this peer's place in the run: the first peer's theta starts the
        run; a newcomer receives theta, the momentum and the step, and its model is set to
        theta. Blocks until admitted (and, at step 0, until ``min_peers`` are there)."""
        if self.joined:
            raise InvalidUsageError("DiLoCo.join(): already joined")
        progress = self.group.join()
        self.joined = True
        if progress is None:
            self.group.boundary(self.outer_step, self.min_peers)
            return
        self.outer_step = int(progress[0])
        self.inner_step = 0
        if progress[1] == REDUCE:  # admitted during a reduction: take part with weight 0
            zeros = torch.zeros(self.outer.numel(), dtype=self.params[0].dtype, device=self.params[0].device)
            self._outer_step(zeros, 0.0)
        else:
            self.group.grow(self.min_peers if self.outer_step == 0 else 1)
            self.outer.load_into(self.params)

    def __enter__(self) -> "DiLoCo":
        if not self.joined:
            self.join()
        return self

    def __exit__(self, *exc: object) -> None:
        pass  # the Communicator is the caller's to close

    # ------------------------------------------------------------------ training

    def step(self) -> bool:
        """Call once after every ``inner_optimizer.step()``. Every ``sync_every``-th call runs
        the outer step (a collective; blocks through re-forms after a peer loss) and returns
        True; the model then holds the new theta. Other calls return False at once."""
        if not self.joined:
            raise InvalidUsageError("DiLoCo.step() before join() (or `with DiLoCo(...)`)")
        self.inner_step += 1
        if self.inner_step < self.sync_every:
            return False
        self._outer_step(self.outer.pseudo_gradient(self.params), 1.0)
        return True

    def _outer_step(self, pseudo_gradient: torch.Tensor, weight: float) -> None:
        """Reduce (retried in the re-formed group until it succeeds), then apply, then the
        next boundary (admissions). theta changes only after the reduction succeeded."""
        mean = self.group.reduce(self.outer_step, [pseudo_gradient], weight, self.quant)[0]
        self.outer.step(mean)
        self.outer.load_into(self.params)
        self.outer_step += 1
        self.inner_step = 0
        self.group.boundary(self.outer_step)

    @property
    def outer_params(self) -> List[torch.Tensor]:
        """theta, the outer parameters (bit-identical on every peer after each outer step)."""
        return self.outer.params

    @property
    def bytes_sent(self) -> int:
        """Wire bytes this peer sent: all-reduce payload and shared state served."""
        return self.group.bytes_sent

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to resume bit-identically: theta, the outer momentum, the
        counters, the model (the local copy) and the inner optimizer. Tensors are copies."""
        return {
            "outer_step": self.outer_step,
            "inner_step": self.inner_step,
            "outer_params": [p.clone() for p in self.outer.params],
            "outer_momentum": [b.clone() for b in self.outer.buffers],
            "model": {k: v.clone() for k, v in self.model.state_dict().items()},
            "inner_optimizer": self.inner_optimizer.state_dict(),
        }

    @torch.no_grad()
    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restores what state_dict() saved, in place (the tensors ferry syncs stay the same
        objects). Call it before join(): the first peer's restored theta then starts the run,
        and a newcomer's is replaced by the group's."""
        if self.joined:
            raise InvalidUsageError("DiLoCo.load_state_dict() after join(): restore first, then join")
        if len(state["outer_params"]) != len(self.outer.params):
            raise InvalidArgumentError("state_dict does not match this model (parameter count)")
        for dst, src in zip(self.outer.params, state["outer_params"]):
            dst.copy_(src)
        for dst, src in zip(self.outer.buffers, state["outer_momentum"]):
            dst.copy_(src)
        self.model.load_state_dict(state["model"])
        self.inner_optimizer.load_state_dict(state["inner_optimizer"])
        self.outer_step = int(state["outer_step"])
        self.inner_step = int(state["inner_step"])
