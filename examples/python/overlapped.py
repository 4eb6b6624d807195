"""DiLoCo whose outer all-reduces overlap the inner steps: the engine behind async_diloco.py
(one fragment, one outer step of delay) and streaming_diloco.py (F fragments on a staggered
schedule).

The parameters are split into F fragments. Every H/F inner steps comes a *sync point* k:

1. the reduction issued at sync point k-1 (it ran on ferry's threads during the last H/F
   inner steps) is waited; its fragment's outer Nesterov SGD applies the averaged
   pseudo-gradient, and the local copy of that fragment is merged with the new outer
   weights (``progress``: new outer + the local progress made since the reduction was
   issued; ``mix``: alpha * local + (1 - alpha) * outer, as Streaming DiLoCo);
2. a membership boundary (nothing is in flight, so the group may vote; see elastic.py);
3. fragment (k-1) mod F's pseudo-gradient (outer - local) is issued with all_reduce_async,
   and training goes on at once.

Each fragment is thus synced once every H inner steps, and its all-reduce hides behind H/F
inner steps of compute. A newcomer starts from the outer weights and contributes weight 0 to
the reduction under way when it arrives.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import torch

from task import content_hash, train_step
from elastic import REDUCE, ElasticGroup, PendingReduce
from outer import OuterOptimizer
from peer_cli import Peer


class Fragment:
    """A group of whole layers, its outer optimizer, and the local values when it was last issued."""

    def __init__(self, index: int, params: List[torch.Tensor], peer: Peer) -> None:
        self.params = params
        self.outer = OuterOptimizer(params, peer.args.outer_lr, peer.args.outer_momentum, prefix=f"outer{index}")
        self.issued: Optional[List[torch.Tensor]] = None

    @torch.no_grad()
    def merge(self, merge: str, alpha: float) -> None:
        """After an outer step: bring the local copy to the new outer weights."""
        for i, (p, o) in enumerate(zip(self.params, self.outer.params)):
            if merge == "mix":
                p.mul_(alpha).add_(o, alpha=1 - alpha)
            else:  # new outer + progress made since the issue
                progress = p - self.issued[i] if self.issued is not None else torch.zeros_like(p)
                p.copy_(o).add_(progress)


def fragments_of(peer: Peer, count: int) -> List[Fragment]:
    layers = [m for m in peer.model if list(m.parameters())]
    if not 1 <= count <= len(layers):
        raise SystemExit(f"--fragments must be 1..{len(layers)} (the model's layers)")
    groups = np.array_split(np.arange(len(layers)), count)
    return [Fragment(i, [p for j in g for p in layers[j].parameters()], peer) for i, g in enumerate(groups)]


def run(peer: Peer, fragment_count: int, merge: str, alpha: float) -> None:
    args = peer.args
    fragments = fragments_of(peer, fragment_count)
    period = args.inner_steps // fragment_count
    if period < 1 or args.inner_steps % fragment_count:
        raise SystemExit("--inner-steps must be a multiple of --fragments")
    last = args.outer_steps * fragment_count  # sync points 1..last
    shared = {name: t for f in fragments for name, t in f.outer.shared().items()}

    def fragment_at(k: int) -> Fragment:
        return fragments[(k - 1) % fragment_count]

    def finish(group: ElasticGroup, pending: PendingReduce) -> None:
        frag = fragment_at(pending.step)
        frag.outer.step(group.finish_reduce(pending)[0])
        frag.merge(merge, alpha)

    def issue(group: ElasticGroup, k: int, weight: float) -> PendingReduce:
        frag = fragment_at(k)
        delta = frag.outer.pseudo_gradient(frag.params)
        if weight == 0:
            delta.zero_()
        frag.issued = [p.detach().clone() for p in frag.params]
        return group.start_reduce(k, [delta], weight, args.quant)

    with peer.communicator() as comm:
        group = ElasticGroup(comm, shared, peer.log)
        k, pending, losses = 0, None, []
        progress = group.join()
        if progress is None:
            group.boundary(0, args.min_peers)  # before any training
        else:  # a newcomer: start from the outer weights, take part where the group stands
            for f in fragments:
                f.outer.load_into(f.params)
            k = int(progress[0])
            if progress[1] == REDUCE:
                finish(group, group.start_reduce(k, [torch.zeros(fragment_at(k).outer.numel(), device=args.device)], 0.0, args.quant))
                k += 1
                if k <= last:
                    group.boundary(k)
            else:
                group.grow(args.min_peers if k == 0 else 1)
            if 0 < k <= last:
                pending = issue(group, k, 0.0)
        while k < last:
            for _ in range(period):
                losses.append(train_step(peer.model, peer.optimizer, peer.batches.next()))
            k += 1
            if pending is not None:
                finish(group, pending)
            group.boundary(k)
            pending = issue(group, k, 1.0)
            if k % fragment_count == 0:
                peer.report(k // fragment_count - 1, sum(losses) / len(losses), None, comm.group_world_size,
                            group.bytes_sent)
                losses = []
        if pending is not None:
            finish(group, pending)
        for f in fragments:
            f.outer.load_into(f.params)
        peer.finish(peer.model, content_hash([p for f in fragments for p in f.outer.params]), group.bytes_sent, world=comm.group_world_size)

