"""DiLoCo's sync points: what each one puts on the network and when, blocking or overlapped,
and how a newcomer takes its place in one (the schedule is in ferry/diloco.py's docstring).

Mixed into :class:`ferry.diloco.DiLoCo` (as the Communicator's calls are into it): the state
(fragments, the pending reduction, the meter, the group) is DiLoCo's, set up by its
constructor; nothing here is public.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

import torch

from .elastic import BOUNDARY, FINAL, PendingReduce
from .outer import Fragment
from .sparseloco import SparseContribution

__all__ = ["SyncPoints"]


class SyncPoints:
    """The sync-point mechanics of DiLoCo (mixed in)."""

    def _fragment_at(self, sync_point: int) -> Fragment:
        """Sync points count from 1; fragment (n - 1) mod F syncs at the n-th: a staggered
        round robin in which each fragment syncs once every H inner steps."""
        return self.fragments[(sync_point - 1) % len(self.fragments)]

    def _arrive(self, label: int, phase: int, deadline: Optional[float] = None) -> None:
        """A newcomer takes its place at progress (label, phase) with weight 0 where the
        group reduces what it trained; see the module docstring for the collectives."""
        self.pending = None
        for f in self.fragments:
            f.reset()
        for fb in self.feedback or ():
            fb.reset()  # a newcomer's accumulator starts at zero (a restored peer's too)
        self.meter.reset()
        if phase == BOUNDARY:
            self._set_synced(label)
            self.group.grow(self.min_peers if label == 0 else 1, deadline)
            if self.overlap and label > 0:
                self.owed = [lambda: self._issue(label, 0.0)]
        elif not self.overlap:  # inside the reduction of sync point label + 1
            self._set_synced(label + 1)
            self._blocking_sync(label + 1, 0.0)
        else:  # inside the reduction issued at sync point label (finished at label + 1, or FINAL)
            self.pending = self._start(label, 0.0, phase)
            self._finish_pending()
            self._fragment_at(label).reset()
            if phase == FINAL:
                self._set_synced(label)
            else:
                self._set_synced(label + 1)
                # The others' next sync point: its boundary (if it ends an outer step) and issue.
                self.owed = [lambda: self._overlapped_sync(label + 1, weight=0.0)]

    def _blocking_sync(self, sync_point: int, weight: float) -> None:
        """Reduce (retried in the re-formed group until it succeeds), then apply, then the
        next boundary (admissions). theta changes only after the reduction succeeded."""
        inputs, leader = self._inputs(sync_point, weight)
        means = self.group.reduce(sync_point - 1, inputs, weight, self._quants(inputs), leader)
        self._apply(sync_point, means, weight, self.group.last_total)
        self.group.boundary(sync_point)

    def _overlapped_sync(self, sync_point: int, weight: Optional[float] = None) -> None:
        """Apply the reduction issued at the last sync point (it ran during the inner steps
        since), admit at the boundary (nothing in flight) if this sync point ends an outer
        step, issue this one's and return."""
        if self.pending is not None:
            self._finish_pending()
        # An admission check is a barrier (every member must ask the master), and nothing
        # else lines the peers up here: one per sync point made each wait out the others'
        # drift F times per outer step (~10% of a streaming F=4 step, measured). Once per
        # outer step, a newcomer waits at most H inner steps, as with plain DiLoCo.
        if sync_point % len(self.fragments) == 0:
            self.group.boundary(sync_point)
        self._issue(sync_point, self.meter.take((sync_point - 1) % len(self.fragments)) if weight is None else weight)

    def _issue(self, sync_point: int, weight: float) -> None:
        if weight:
            self._fragment_at(sync_point).snapshot()
        # else a newcomer (nothing trained: its snapshot is the theta it started from) or a
        # peer below min_work (its local progress stays, merged as usual)
        self.pending = self._start(sync_point, weight)

    def _start(self, sync_point: int, weight: float, phase: Optional[int] = None) -> PendingReduce:
        inputs, leader = self._inputs(sync_point, weight)
        if phase is None:
            return self.group.start_reduce(sync_point, inputs, weight, self._quants(inputs), leader=leader)
        return self.group.start_reduce(sync_point, inputs, weight, self._quants(inputs), phase, leader)

    def _inputs(self, sync_point: int, weight: float):
        """What this peer contributes at ``sync_point``: its fragment's pseudo-gradient times
        ``weight`` (zeros for 0), then, if it ends an outer step, the module buffers; and the
        indices of the inputs that are the leader's (integer buffers)."""
        fragment = self._fragment_at(sync_point)
        if weight:
            delta = fragment.outer.pseudo_gradient(fragment.params)
            if self.feedback is not None:  # SparseLoCo: into the accumulator; its top-k is sent
                delta = self.feedback[(sync_point - 1) % len(self.fragments)].contribute(delta, weight)
            elif weight != 1:
                delta.mul_(weight)
        else:
            delta = self._zeros(sync_point)
        inputs = [delta]
        if self.buffers is not None and len(self.buffers) and sync_point % len(self.fragments) == 0:
            inputs += self.buffers.inputs(weight) if weight else self.buffers.zeros()
            return inputs, self.buffers.leader(1)
        return inputs, []

    def _quants(self, inputs: Sequence[torch.Tensor]) -> List[Optional[str]]:
        """The pseudo-gradient quantized as asked; the buffers in full precision."""
        return [self.quant] + [None] * (len(inputs) - 1)

    def _apply(self, sync_point: int, means: Sequence[torch.Tensor], weight: float, total: float) -> None:
        fragment = self._fragment_at(sync_point)
        fragment.outer.step(means[0])
        if len(means) > 1:
            self.buffers.load(means[1:], contributed=total > 0)
        if not self.overlap:
            fragment.outer.load_into(fragment.params)
        entry = self.meter.settled((sync_point - 1) // len(self.fragments), weight, total, self.comm.world_size)
        if self.show_work and sync_point % len(self.fragments) == 0:
            self.comm.set_label(entry.label())  # display only: one small frame, nothing waits for it

    def _finish_pending(self) -> None:
        pending, self.pending = self.pending, None
        means = self.group.finish_reduce(pending)
        self._apply(pending.step, means, pending.weight, self.group.last_total)
        self._fragment_at(pending.step).merge(self.merge, self.alpha)

    def _reissue(self) -> None:
        """After a restore: the reduction the checkpoint had in flight, again (same inputs)."""
        if self.pending is not None:
            p = self.pending
            self.pending = self.group.start_reduce(p.step, p.inputs, p.weight, p.quant, leader=p.leader)

    def _settle_owed(self) -> None:
        owed, self.owed = self.owed, []
        for action in owed:
            action()

    def _zeros(self, sync_point: int) -> Union[torch.Tensor, SparseContribution]:
        fragment = self._fragment_at(sync_point)
        if self.feedback is not None:
            return self.feedback[0].nothing(fragment.outer.numel(), self.params[0].dtype, self.outer_device)
        return torch.zeros(fragment.outer.numel(), dtype=self.params[0].dtype, device=self.outer_device)
