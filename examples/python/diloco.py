#!/usr/bin/env python3
"""DiLoCo over ferry on scikit-learn's digits: each peer runs H inner AdamW steps on its own
shard, then the peers average their pseudo-gradients (outer weights - local weights) with one
all-reduce (optionally quantized, --quant u8/u4) and apply it with an outer Nesterov SGD.

The algorithm is the library's (ferry.diloco.DiLoCo, one step() call per inner step). Peers
may join at any outer step (they receive the outer model, the outer optimizer's momentum and
the step through ferry's shared-state sync) and may die at any time (the survivors re-form
the ring and redo the reduction): see ferry/elastic.py. Every surviving peer ends
each outer step with bit-identical outer weights; the final line prints their hash.

Modes:
  diloco  (default) the algorithm above
  ddp     the every-step baseline: gradients all-reduced after every inner step, one AdamW
          (model and AdamW state are the shared state)
  single  one process, no ferry: AdamW on the whole training set, batch = --batch x
          --num-shards, the same T x H steps (the data and compute of --num-shards peers)
  local   one peer's shard alone, no ferry (the compute of a DiLoCo peer without its talk)

  # a master, then peers (anywhere that can reach it):
  ferry-master --listen 0.0.0.0:48148 &
  for i in 0 1 2 3; do examples/python/diloco.py --master 127.0.0.1:48148 --shard $i --num-shards 4 \\
      --min-peers 4 --name peer$i & done
"""

from __future__ import annotations

import math
import time
from typing import Callable, List, Sequence

import torch

from ferry.diloco import CommTime, DiLoCo
from task import content_hash, evaluate, train_step
from elastic import REDUCE, ElasticGroup
from outer import split_flat
from peer_cli import Peer, parser

Work = Callable[[int], "tuple[List[torch.Tensor], float]"]
Apply = Callable[[int, List[torch.Tensor]], None]


def elastic_loop(peer: Peer, group: ElasticGroup, steps: int, zeros: Callable[[], List[torch.Tensor]],
                 work: Work, apply: Apply, report_every: int = 1) -> None:
    """Steps 0..steps-1, each: boundary (admissions), work -> tensors, weighted mean over the
    group, apply. A newcomer starts where the group stands (see elastic.py)."""
    args = peer.args
    step, resume, losses = 0, None, []
    progress = group.join()
    if progress is not None:
        step, resume = int(progress[0]), ("reduce" if progress[1] == REDUCE else "boundary")
    while step < steps:
        min_peers = args.min_peers if step == 0 else 1
        if resume is None and step % report_every == 0:  # admissions once per reported (outer) step
            group.boundary(step, min_peers)
        elif resume == "boundary":
            group.grow(min_peers)
        if resume == "reduce":  # admitted in the middle of this step's reduction: contribute nothing
            inputs, loss, weight = zeros(), math.nan, 0.0
        else:
            (inputs, loss), weight = work(step), 1.0
        resume = None
        apply(step, group.reduce(step, inputs, weight, args.quant))
        losses.append(loss)
        if (step + 1) % report_every == 0 or step + 1 == steps:
            finite = [x for x in losses if not math.isnan(x)]
            peer.report(step // report_every, sum(finite) / max(1, len(finite)), peer.model,
                        group.comm.world_size, group.bytes_sent)
            losses = []
        step += 1


def comm_figures(t: CommTime) -> dict:
    """The run's time in collectives, for the --result summary (seconds, whole run)."""
    return dict(reduce_s=t.reduce_s, hidden_s=t.hidden_s, exposed_s=t.exposed_s, membership_s=t.membership_s)


def work_note(diloco: DiLoCo) -> str:
    """This peer's part of the last outer step: its inner steps and its share of the update."""
    if not diloco.work:
        return ""
    w = diloco.work[-1]
    return f" | {w.steps} inner steps, share {w.share * 100:.0f}%" if w.group_weight else f" | {w.steps} inner steps"


def run_diloco(peer: Peer, **options) -> None:
    """DiLoCo through the library: ferry.diloco.DiLoCo does the outer step, joins and retries.
    ``options``: DiLoCo's fragments, overlap, merge, alpha (async_diloco.py, streaming_diloco.py).
    --inner-time runs it time-boxed (capped at --inner-steps per phase unless --no-step-cap);
    --step-time pads every inner step (a GPU of that speed)."""
    args = peer.args
    schedule = dict(inner_time=args.inner_time) if args.inner_time else {}
    capped = not (args.inner_time and args.no_step_cap)
    with peer.communicator() as comm:
        peer.log_membership()
        diloco = DiLoCo(comm, peer.model, peer.optimizer, sync_every=args.inner_steps if capped else None,
                        outer_lr=args.outer_lr, outer_momentum=args.outer_momentum, quant=args.quant,
                        min_peers=args.min_peers, sparse=args.sparse, **schedule, **options)
        diloco.join()
        began, curve, inner_s = time.monotonic(), [], 0.0
        # With overlap the model is not theta between outer steps: no held-out loss per step. Nor
        # time-boxed or with --curve: an evaluation between steps would eat into the next phase
        # (the phase starts when step() returns) or hold the group up at the next outer step.
        # --quiet prints no per-step line: no held-out loss for it either.
        evaluated = None if options.get("overlap") or args.inner_time or args.curve or args.quiet else peer.model
        losses = []
        while diloco.outer_step < args.outer_steps:
            step_began = time.monotonic()
            losses.append(train_step(peer.model, peer.optimizer, peer.batches.next()))
            time.sleep(max(0.0, args.step_time - (time.monotonic() - step_began)))
            inner_s += time.monotonic() - step_began
            if diloco.step():
                if args.curve:  # theta, evaluated after the run: an evaluation here would delay this peer
                    curve.append((time.monotonic() - began, [p.clone() for p in diloco.outer_params]))
                peer.report(diloco.outer_step - 1, sum(losses) / len(losses), evaluated, comm.world_size,
                            diloco.bytes_sent, work_note(diloco))
                losses = []
        diloco.finish()
        wall = time.monotonic() - began
        steps = [w.steps for w in diloco.work]
        peer.finish(peer.model, content_hash(diloco.outer_params), diloco.bytes_sent,
                    world=comm.world_size, train_wall_s=wall, inner_steps_per_outer=steps,
                    inner_step_s=inner_s / max(1, sum(steps)),
                    curve=held_out_curve(peer, curve), **comm_figures(diloco.comm_time))


def held_out_curve(peer: Peer, curve: list) -> list:
    """[seconds since the join, held-out loss of theta then] for every kept outer step."""
    out = []
    saved = [p.detach().clone() for p in peer.params]
    for seconds, theta in curve:
        with torch.no_grad():
            for p, t in zip(peer.params, theta):
                p.copy_(t)
        out.append([seconds, evaluate(peer.model, peer.data.test_x, peer.data.test_y)[0]])
    with torch.no_grad():
        for p, t in zip(peer.params, saved):
            p.copy_(t)
    return out


def adamw_state(optimizer: torch.optim.Optimizer, params: Sequence[torch.Tensor]) -> dict:
    """AdamW's state made eagerly (as its first step would) and named, to share with newcomers."""
    named = {}
    for i, p in enumerate(params):
        state = optimizer.state[p]
        state["step"] = torch.tensor(0.0)
        state["exp_avg"] = torch.zeros_like(p)
        state["exp_avg_sq"] = torch.zeros_like(p)
        named.update({f"adamw.step.{i}": state["step"], f"adamw.exp_avg.{i}": state["exp_avg"],
                      f"adamw.exp_avg_sq.{i}": state["exp_avg_sq"]})
    return named


def run_ddp(peer: Peer) -> None:
    args = peer.args
    params = peer.params
    shared = {f"model.{i}": p.data for i, p in enumerate(params)}
    shared.update(adamw_state(peer.optimizer, params))

    def work(step: int):
        loss = train_step(peer.model, peer.optimizer, peer.batches.next(), step=False)
        return [torch.cat([p.grad.reshape(-1) for p in params])], loss

    def apply(step: int, means: List[torch.Tensor]) -> None:
        for p, g in zip(params, split_flat(means[0], params)):
            p.grad.copy_(g)
        peer.optimizer.step()

    zeros = lambda: [torch.zeros(sum(p.numel() for p in params), device=args.device)]  # noqa: E731
    with peer.communicator() as comm:
        peer.log_membership()
        group = ElasticGroup(comm, shared)
        elastic_loop(peer, group, args.outer_steps * args.inner_steps, zeros, work, apply,
                     report_every=args.inner_steps)
        peer.finish(peer.model, content_hash(params), group.bytes_sent, world=comm.world_size,
                    **comm_figures(group.time))


def run_alone(peer: Peer) -> None:
    """single / local: AdamW steps with no communication, reported every H steps."""
    args = peer.args
    for step in range(args.outer_steps):
        losses = [train_step(peer.model, peer.optimizer, peer.batches.next()) for _ in range(args.inner_steps)]
        peer.report(step, sum(losses) / len(losses), peer.model, 1, 0)
    peer.finish(peer.model, content_hash(peer.params), 0, world=1)


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["diloco", "ddp", "single", "local"], default="diloco")
    args = p.parse_args()
    peer = Peer(args, whole_training_set=args.mode == "single")
    {"single": run_alone, "diloco": run_diloco, "ddp": run_ddp, "local": run_alone}[args.mode](peer)


if __name__ == "__main__":
    main()
