"""The toy DiLoCo task of test_diloco.py, and a peer running it in its own process (to be killed).

The model is one or more 4-element vectors (top-level parameters w, w1, w2, ...: one layer
each, for fragments) trained by SGD with lr 1 on gradients chosen by (shard, global inner step,
layer): quarter-integers, so every sum the reductions make is exact and a replay without ferry
(replay()) predicts the peers' outer weights bit for bit. The gradients do not depend on the
weights, so with overlap and the "progress" merge each reduction still averages the gradients
of its own window of inner steps, and the outer weights end as a blocking run's do.

usage: diloco_peer.py MASTER_ADDRESS MIN_PEERS OUTER_STEPS DIE_AT SHARD [LAYERS FRAGMENTS OVERLAP H]
  runs DiLoCo (H = SYNC_EVERY unless given) as shard SHARD; at outer step DIE_AT, having
  trained the interval, it calls step() and dies inside its outer all-reduce: blocking, it
  SIGKILLs itself 0.2 s after the call; overlapped (OVERLAP 1), it SIGKILLs itself where it
  would issue that reduction, after the boundary, so the others' reduction can never finish.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Dict, List, Sequence

import torch

import ferry
from ferry.diloco import DiLoCo, OuterOptimizer

SYNC_EVERY, OUTER_LR, OUTER_MOMENTUM = 3, 0.5, 0.5
PEER_ARGS = dict(listen_host="127.0.0.1", timeout=10, progress_timeout=5,
                 heartbeat_timeout=3, connections=2)


LAYER_STRIDE = 5  # layer i's gradients are those of step + 5 i: each layer learns its own


class Vector(torch.nn.Module):
    def __init__(self, layers: int = 1) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(4))
        for i in range(1, layers):
            self.register_parameter(f"w{i}", torch.nn.Parameter(torch.zeros(4)))


def gradient(shard: int, step: int, diverge_from: int = 0, layer: int = 0) -> torch.Tensor:
    """The inner gradient of `shard` at global inner step `step`: every shard's is the same
    before `diverge_from` (so a mean over 3 peers stays exact), then each shard's differs."""
    k = torch.arange(4, dtype=torch.float32)
    g = ((k * 3 + step + LAYER_STRIDE * layer) % 7 - 3) * 0.25
    if step >= diverge_from:
        g = g + (shard + 1) * 0.25 * (k - 1.5)
    return g


def toy(comm: ferry.Communicator, layers: int = 1, sync_every: int = SYNC_EVERY, inner_momentum: float = 0.0,
        **kwargs) -> DiLoCo:
    model = Vector(layers)
    inner = torch.optim.SGD(model.parameters(), lr=1.0, momentum=inner_momentum)
    return DiLoCo(comm, model, inner, sync_every=sync_every, outer_lr=OUTER_LR, outer_momentum=OUTER_MOMENTUM,
                  **kwargs)


def inner_step(diloco: DiLoCo, shard: int, diverge_from: int = 0) -> bool:
    """One inner step of the toy task, then diloco.step()."""
    step = diloco.outer_step * diloco.sync_every + diloco.inner_step
    for layer, p in enumerate(diloco.model.parameters()):
        p.grad = gradient(shard, step, diverge_from, layer)
    diloco.inner_optimizer.step()
    return diloco.step()


def replay(shards_at: Sequence[Sequence[int]], diverge_from: int = 0) -> Dict[str, torch.Tensor]:
    """The outer weights and momentum after len(shards_at) outer steps, outer step t averaging
    the shards shards_at[t], computed without ferry by the same torch operations."""
    outer = OuterOptimizer([torch.zeros(4)], OUTER_LR, OUTER_MOMENTUM)
    for t, shards in enumerate(shards_at):
        total = torch.zeros(4)
        for shard in shards:
            local = outer.params[0].clone()
            for i in range(SYNC_EVERY):
                local.add_(gradient(shard, t * SYNC_EVERY + i, diverge_from), alpha=-1.0)
            total += outer.params[0] - local
        outer.step(total.div_(float(len(shards))))
    return {"theta": outer.params[0], "momentum": outer.buffers[0]}


def bits(tensors) -> bytes:
    return b"".join(t.detach().contiguous().numpy().tobytes() for t in tensors)


def tiny_mlp_peer(address, shard, world, outer_steps, quant, **options):
    """A small MLP trained by DiLoCo with AdamW on its own shard's data; returns the bits of theta,
    of the model after finish() and of the model before it."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    inner = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(100 + shard)
    with ferry.Communicator(address, **PEER_ARGS) as comm, \
            DiLoCo(comm, model, inner, sync_every=4, quant=quant, min_peers=world, **options) as diloco:
        while diloco.outer_step < outer_steps:
            x = torch.randn(16, 8, generator=data)
            loss = torch.nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
            inner.zero_grad()
            loss.backward()
            inner.step()
            diloco.step()
        before = bits(model.parameters())
        diloco.finish()
        return bits(diloco.outer_params), bits(model.parameters()), before


def die_when_issuing(diloco: DiLoCo, step: int) -> None:
    """Fault injection: SIGKILL this process where it would issue the reduction of `step`."""
    start_reduce = diloco.group.start_reduce

    def start_or_die(label, *args, **kwargs):
        if label == step:
            os.kill(os.getpid(), signal.SIGKILL)
        return start_reduce(label, *args, **kwargs)

    diloco.group.start_reduce = start_or_die


def main(argv: List[str]) -> int:
    address, min_peers, outer_steps, die_at, shard = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
    layers, fragments, overlap, sync_every = (int(a) for a in (argv[5:] or [1, 1, 0, SYNC_EVERY]))
    with ferry.Communicator(address, **PEER_ARGS) as comm:
        diloco = toy(comm, layers, sync_every, min_peers=min_peers, fragments=fragments, overlap=bool(overlap))
        diloco.join()
        if overlap:
            die_when_issuing(diloco, (die_at + 1) * fragments)
        print("ready", flush=True)
        while diloco.outer_step < outer_steps:
            if diloco.outer_step == die_at and diloco.inner_step == sync_every - 1 and not overlap:
                threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGKILL)).start()
            inner_step(diloco, shard, diverge_from=die_at * sync_every)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
