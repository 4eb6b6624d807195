"""The work behind DiLoCo's pseudo-gradients: how many inner steps (or samples) each peer ran
since a fragment last synced, the weight that work earns in the outer step, the time box
that ends an inner phase, and the per-outer-step record a peer can show (``DiLoCo.work``).

**Weights.** Each peer's pseudo-gradient enters the outer step as ``w_i delta_i``, and the
group divides by ``sum_i w_i`` (ferry.elastic): w_i is 1 per trained peer in the fixed
schedule (``weight_by=None``), else its steps or samples since the fragment's last sync,
and 0 below ``min_work`` (a peer that did almost nothing contributes no noise). The sums
ride the same all-reduce as today's weights, so the mean stays bit-identical everywhere.

**The time box.** An inner phase (a window: H/F inner steps in the fixed schedule) ends at
the first ``step()`` that finds T/F seconds gone since the phase began, and a phase
begins when this peer's previous sync point returned (whatever the caller does between
step() calls, an evaluation say, counts against the phase). Only durations on one peer's own
clock (``time.monotonic()`` by default) are compared, never two peers' clocks: a peer whose
clock is off by hours, or runs fast, ends its own phases early or late but cannot move
another's deadline, and nobody waits for a time that no clock of its own will show. The
phases still line up because a blocking outer step returns at about the same moment on
every peer (when the last contribution arrived); overlapped, each peer's phases drift
freely until a wait for the reduction in flight lines them up again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from .errors import InvalidArgumentError, InvalidUsageError

__all__ = ["WEIGHT_BY", "TimeBox", "WorkMeter", "WorkStats"]

WEIGHT_BY = ("steps", "samples")
# How many outer steps of WorkStats a DiLoCo keeps (a few hundred bytes each).
WORK_LOG_LENGTH = 10_000


@dataclass
class WorkStats:
    """One outer step as this peer saw it.

    Attributes:
        outer_step: which outer step (0-based, the group's count).
        steps: inner steps this peer ran in the outer step's phases.
        samples: the samples it reported for them (``step(samples=...)``; 0 if none).
        weight: the weight its pseudo-gradients carried (summed over the outer step's
            fragments; 0 for a newcomer or a peer below ``min_work``).
        group_weight: the group's total weight for them (0 until the reductions settle).
        world: the group's size when its last reduction settled.
    """

    outer_step: int
    steps: int = 0
    samples: int = 0
    weight: float = 0.0
    group_weight: float = 0.0
    world: int = 0

    @property
    def share(self) -> float:
        """This peer's part of the outer step's update (weight / group_weight)."""
        return self.weight / self.group_weight if self.group_weight else 0.0

    def label(self) -> str:
        """One line for the master's /status and dashboard (printable ASCII, well under the
        128 characters a label may hold): "outer 12: 97 steps, 0 samples, share 24% of 4"."""
        return (f"outer {self.outer_step}: {self.steps} steps, {self.samples} samples, "
                f"share {self.share * 100:.0f}% of {self.world}")


class TimeBox:
    """A window of ``seconds`` on ``clock``; ``seconds`` None: never due (the fixed schedule)."""

    def __init__(self, seconds: Optional[float], clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.clock = clock
        self.began = clock()

    def restart(self, elapsed: float = 0.0) -> None:
        self.began = self.clock() - elapsed

    @property
    def elapsed(self) -> float:
        return self.clock() - self.began

    def due(self) -> bool:
        return self.seconds is not None and self.elapsed >= self.seconds


class WorkMeter:
    """Work since each fragment's last sync, turned into weights; and the WorkStats log."""

    def __init__(self, fragments: int, weight_by: Optional[str], min_work: float) -> None:
        if weight_by is not None and weight_by not in WEIGHT_BY:
            raise InvalidArgumentError(f"weight_by must be None or one of {WEIGHT_BY}, got {weight_by!r}")
        if not min_work >= 0:
            raise InvalidArgumentError(f"min_work must be >= 0, got {min_work!r}")
        self.weight_by, self.min_work = weight_by, float(min_work)
        self.since_sync = [0.0] * fragments  # work since each fragment's last issue
        self.log: List[WorkStats] = []

    def add(self, outer_step: int, samples: Optional[int]) -> None:
        """One inner step (of ``samples`` samples) in outer step ``outer_step``."""
        if self.weight_by == "samples" and samples is None:
            raise InvalidUsageError("DiLoCo(weight_by='samples'): call step(samples=N) with the batch's samples")
        unit = 1.0 if self.weight_by != "samples" else float(samples)
        self.since_sync = [w + unit for w in self.since_sync]
        record = self.record(outer_step)
        record.steps += 1
        record.samples += int(samples or 0)

    def take(self, fragment: int) -> float:
        """The weight of ``fragment``'s pseudo-gradient now being issued; restarts its count."""
        work, self.since_sync[fragment] = self.since_sync[fragment], 0.0
        if self.weight_by is None:
            return 1.0
        return work if work >= self.min_work and work > 0 else 0.0

    def reset(self) -> None:
        """A newcomer, or a local copy restarted from theta: no work to show."""
        self.since_sync = [0.0] * len(self.since_sync)

    def record(self, outer_step: int) -> WorkStats:
        """The log's entry for ``outer_step`` (made when first needed)."""
        for entry in reversed(self.log[-4:]):  # an overlapped reduction settles one outer step late
            if entry.outer_step == outer_step:
                return entry
        entry = WorkStats(outer_step)
        self.log.append(entry)
        del self.log[:-WORK_LOG_LENGTH]
        return entry

    def settled(self, outer_step: int, weight: float, total: float, world: int) -> WorkStats:
        entry = self.record(outer_step)
        entry.weight += weight
        entry.group_weight += total
        entry.world = world
        return entry

    def state(self) -> Dict[str, object]:
        return {"since_sync": list(self.since_sync)}

    def load(self, state: Dict[str, object]) -> None:
        since = list(state["since_sync"])  # type: ignore[arg-type]
        if len(since) != len(self.since_sync):
            raise InvalidArgumentError("state_dict's work counters do not match this DiLoCo's fragments")
        self.since_sync = [float(w) for w in since]
