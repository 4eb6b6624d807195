"""DiLoCo's checkpoints: what ``DiLoCo.state_dict()`` holds and how ``load_state_dict()``
puts it back (the documentation is on those methods)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict

import torch

from .elastic import PendingReduce
from .errors import InvalidArgumentError, InvalidUsageError

if TYPE_CHECKING:
    from .diloco import DiLoCo

__all__ = ["restore", "save"]


def save(d: "DiLoCo") -> Dict[str, Any]:
    if d.owed:
        raise InvalidUsageError("DiLoCo.state_dict(): a newcomer checkpoints after its first step()")
    state = {
        "outer_step": d.outer_step,
        "inner_step": d.inner_step,
        "sync_points": d.synced,
        "window_steps": d.window_steps,
        "window_elapsed_s": d.box.elapsed if d.inner_time is not None else 0.0,
        "work": d.meter.state(),
        "outer_params": [p.clone() for p in d.outer_params],
        "outer_momentum": [b.clone() for b in d.outer_momentum_buffers],
        "model": {k: v.clone() for k, v in d.model.state_dict().items()},
        "inner_optimizer": d.inner_optimizer.state_dict(),
    }
    if d.feedback is not None:
        state["sparse_feedback"] = [fb.state() for fb in d.feedback]
    if d.overlap:
        pending = d.pending
        state["in_flight"] = None if pending is None else {
            "step": pending.step, "inputs": [t.clone() for t in pending.inputs], "weight": pending.weight,
            "leader": list(pending.leader)}
        state["issued"] = [None if f.issued is None else [t.clone() for t in f.issued] for f in d.fragments]
    return state


@torch.no_grad()
def restore(d: "DiLoCo", state: Dict[str, Any]) -> None:
    if d.joined:
        raise InvalidUsageError("DiLoCo.load_state_dict() after join(): restore first, then join")
    if (len(state["outer_params"]) != len(d.outer_params) or d.overlap != ("in_flight" in state)
            or (d.feedback is not None) != ("sparse_feedback" in state)):
        raise InvalidArgumentError("state_dict does not match this model or mode (parameters, overlap, sparse)")
    for dst, src in zip(d.outer_params, state["outer_params"]):
        dst.copy_(src)
    for dst, src in zip(d.outer_momentum_buffers, state["outer_momentum"]):
        dst.copy_(src)
    for fb, saved in zip(d.feedback or (), state.get("sparse_feedback", ())):
        fb.load(saved)
    d.model.load_state_dict(state["model"])
    d.inner_optimizer.load_state_dict(state["inner_optimizer"])
    if "sync_points" in state:
        d.synced, d.window_steps = int(state["sync_points"]), int(state["window_steps"])
        d.meter.load(state["work"])
        d.restored_elapsed = float(state["window_elapsed_s"])
    else:  # a checkpoint of the fixed schedule from before the time-boxed mode
        position = int(state["outer_step"]) * d.sync_every + int(state["inner_step"])
        d.synced, d.window_steps = divmod(position, d.period)
    d.outer_steps_began = -int(state["inner_step"])  # steps_run counts from here
    if d.overlap:
        for f, issued in zip(d.fragments, state["issued"]):
            f.issued = None if issued is None else [t.clone() for t in issued]
        flight = state["in_flight"]
        inputs = flight and [t.clone() for t in flight.get("inputs") or [flight["input"]]]
        d.pending = None if flight is None else PendingReduce(
            flight["step"], inputs, [], flight["weight"], d._quants(inputs), leader=flight.get("leader", ()))
    d.restored = True
