"""A time-boxed DiLoCo peer in its own process (to be killed mid-phase), and the toy it
shares with test_diloco_timeboxed.py.

usage: timeboxed_peer.py MASTER_ADDRESS MIN_PEERS OUTER_STEPS DIE_AT SHARD
  trains the toy with real time boxes (TIMEBOX_S, a STEP_S sleep per inner step); in outer
  step DIE_AT, after 3 inner steps of the phase, it SIGKILLs itself (mid-phase: no collective
  in progress on its side).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable, List, Optional

import torch

import ferry
from diloco_peer import OUTER_LR, OUTER_MOMENTUM, PEER_ARGS, Vector, gradient
from ferry.diloco import DiLoCo

TIMEBOX_S, STEP_S = 0.25, 0.01


def timeboxed_toy(comm: ferry.Communicator, layers: int = 1, inner_time: float = TIMEBOX_S,
                  cap: Optional[int] = None, **kwargs) -> DiLoCo:
    """The toy, time-boxed; `cap`: its sync_every (the most inner steps a phase may hold)."""
    model = Vector(layers)
    inner = torch.optim.SGD(model.parameters(), lr=1.0)
    return DiLoCo(comm, model, inner, sync_every=cap, outer_lr=OUTER_LR, outer_momentum=OUTER_MOMENTUM,
                  inner_time=inner_time, **kwargs)


def toy_step(diloco: DiLoCo, shard: int, k: int, before_step: Callable[[], None] = lambda: None) -> bool:
    """Inner step number k of this peer (its own count): the toy's gradients of (shard, k)."""
    for layer, p in enumerate(diloco.model.parameters()):
        p.grad = gradient(shard, k, layer=layer)
    diloco.inner_optimizer.step()
    before_step()
    return diloco.step()


def main(argv: List[str]) -> int:
    address, min_peers, outer_steps, die_at, shard = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), int(argv[4])
    with ferry.Communicator(address, **PEER_ARGS) as comm:
        diloco = timeboxed_toy(comm, min_peers=min_peers)
        diloco.join()
        print("ready", flush=True)
        k = 0
        while diloco.outer_step < outer_steps:
            if diloco.outer_step == die_at and diloco.inner_step == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(STEP_S)
            toy_step(diloco, shard, k)
            k += 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
