"""Elastic membership for step-structured training over ferry (PyTorch; ``import ferry`` does
not import this module, so ferry itself keeps working without torch): peers join at any step and die
at any time, and every survivor keeps holding bit-identical shared state.

The protocol (every peer issues the same collectives in the same order):

- **After every topology vote comes a shared-state sync.** The vote may admit newcomers; the
  sync hands them the shared tensors (outer model, outer optimizer state) and a small
  ``progress`` tensor ``[step, phase]`` saying where the group stands. A newcomer's first
  collective after ``connect()`` returns is therefore always that sync (receive-only).
- **At a step boundary** (phase BOUNDARY) every peer asks ``peers_pending()``; when someone
  waits, they vote and sync.
- **A reduction** (phase REDUCE) sums the tensors *and* a weight (1 for a peer that trained
  the interval, 0 for one that joined during it), so the mean divides by the peers that
  contributed, whoever joined or died. If it fails (PeerLostError, TimeoutError: all
  survivors get the same error), the survivors vote, sync (a newcomer admitted by this vote
  learns the phase is REDUCE and joins the reduction with weight 0) and reduce again. Inputs
  are kept intact (results go to separate outputs), so the retry reduces the same values in
  the new world. Inputs named in ``leader`` are not averaged: the group's rank 0 alone sends
  its values (the others send zeros) and every peer receives them, a broadcast that follows
  the ring as re-formed after a loss (DiLoCo's integer module buffers). A total weight of 0
  (nobody contributed) gives zero means, not NaN. An input given as a SparseContribution
  (ferry.sparseloco: one peer's encoded top-k) travels as an all-gather of every peer's
  bytes, and its result is their rank-order sum (ferry.sparse.decode_sum) over the total
  weight, the same bits on every peer. A reduction issued with ``all_reduce_async`` (start_reduce) may run while
  the caller trains, and is waited (and retried) later by finish_reduce; the phase FINAL
  (mark_final) tells a newcomer admitted during such a retry that the group stops after it.

The sync revision counts syncs (ferry requires +1 per sync); the step travels in ``progress``.
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Union

import torch

from .communicator import Communicator
from .errors import PeerLostError, TimeoutError
from .handle import Handle
from .legacy import legacy_call, warn_deprecated
from .sparse import decode_sum
from .sparseloco import SparseContribution

__all__ = ["BOUNDARY", "FINAL", "REDUCE", "RETRYABLE", "CommTime", "PendingReduce", "ElasticGroup"]

# FINAL: a reduction after which the group stops (an overlapped run's last one, drained after
# the loop): a newcomer admitted during it takes part with weight 0 and then has nothing to do.
BOUNDARY, REDUCE, FINAL = 0, 1, 2
PHASE_NAMES = {BOUNDARY: "boundary", REDUCE: "reduce", FINAL: "final reduce"}
RETRYABLE = (PeerLostError, TimeoutError)
# A wait for peers is worth a line once it outlasts a normal start (seconds), then a reminder
# every half minute: often enough to see, rare enough not to drown the training log.
GROW_FIRST_NOTICE_S = 5.0
GROW_NOTICE_EVERY_S = 30.0
#: Where membership events go: a logging.Logger (or LoggerAdapter); None: the module's default.
Logger = Union[None, logging.Logger, logging.LoggerAdapter]
# quant= of a reduction: one for every input, or one per input (None: full precision).
Quant = Union[None, str, Sequence[Optional[str]]]


class EchoingLogger(logging.LoggerAdapter):
    """A logger that also hands each message to a callable: the deprecated ``log=`` (0.3)."""

    def __init__(self, logger: Logger, echo: Callable[[str], None]) -> None:
        super().__init__(logger, {})
        self.echo = echo

    def log(self, level: int, msg: object, *args: object, **kwargs: object) -> None:
        super().log(level, msg, *args, **kwargs)
        self.echo(str(msg) % args if args else str(msg))


def event_logger(owner: str, logger: Logger, log: Optional[Callable[[str], None]]) -> Logger:
    """``logger``, or with a deprecated ``log`` callable, one that echoes to it too."""
    if log is None:
        return logger
    warn_deprecated(f"{owner}(log=...): its events go to the {logger.name!r} logger (or logger=)", stacklevel=5)
    return EchoingLogger(logger, log)


@dataclass
class CommTime:
    """Where one peer's time in the group's collectives went, in seconds summed over the run.

    Attributes:
        reduce_s: the reductions' own durations, each from its call to the master's commit
            (the longest of its operations; retried attempts included).
        waited_s: of the caller's time, what it spent inside start_reduce and finish_reduce:
            issuing the reductions and blocked on them.
        membership_s: what it spent at boundaries (pending checks, votes, shared-state syncs).
    """

    reduce_s: float = 0.0
    waited_s: float = 0.0
    membership_s: float = 0.0

    @property
    def hidden_s(self) -> float:
        """Reduction time the caller did not wait for: it ran behind the caller's own work."""
        return max(0.0, self.reduce_s - self.waited_s)

    @property
    def exposed_s(self) -> float:
        """The caller's time lost to the group: waiting on reductions and at boundaries."""
        return self.waited_s + self.membership_s


@dataclass
class PendingReduce:
    """A reduction in flight (see ElasticGroup.start_reduce)."""

    step: int
    inputs: Sequence[torch.Tensor]
    outputs: List[torch.Tensor]
    weight: float
    quant: Quant
    phase: int = REDUCE
    leader: Sequence[int] = ()  # inputs whose result is group rank 0's, not a mean
    total: float = 0.0  # the group's sum of weights, once settled
    handles: List[Handle] = field(default_factory=list)
    weight_in: torch.Tensor = field(default_factory=lambda: torch.zeros(1, dtype=torch.float64))
    weight_out: torch.Tensor = field(default_factory=lambda: torch.zeros(1, dtype=torch.float64))


class ElasticGroup:
    """One peer's side of the protocol above, over a ferry.Communicator.

    ``shared``: the named tensors every peer must hold identically (updated in place by syncs).
    ``logger``: where membership events go, one record each: joins, world changes and retries
    at INFO, waits worth a person's attention at WARNING (default: the "ferry.elastic"
    logger; pass a child such as ``logging.getLogger("ferry.elastic.peer3")`` to tell peers of
    one process apart). ``log``: deprecated (0.3's form), a callable that also gets each line.
    """

    @legacy_call(positional=("log",))
    def __init__(self, comm: Communicator, shared: Dict[str, torch.Tensor], *,
                 logger: Logger = None, log: Optional[Callable[[str], None]] = None) -> None:
        self.comm = comm
        self.progress = torch.zeros(2, dtype=torch.int64)  # [step, phase]
        self.shared = {**shared, "elastic.progress": self.progress}
        self.logger = event_logger("ElasticGroup", logger or logging.getLogger("ferry.elastic"), log)
        self.revision = 0
        self.bytes_sent = 0  # all-reduce payload and shared state served, by this peer
        self.last_total = 0.0  # the sum of the weights of the last reduction settled
        self.time = CommTime()

    # ------------------------------------------------------------------ joining

    def join(self, deadline: Optional[float] = None) -> Optional[torch.Tensor]:
        """connect(); returns None for the group's first peer (its tensors start the run), else
        the received ``progress`` ([step, phase]) for a newcomer, whose shared tensors now hold
        the group's. Still pending past ``deadline`` (time.monotonic()): the TimeoutError."""
        while True:
            try:
                self.comm.connect()
                break
            except TimeoutError:  # still pending: the group admits at its next boundary
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                self._notice("still waiting to be admitted (the group admits newcomers at its next outer step)")
        if self.comm.world_size == 1:
            return None
        while True:
            try:
                info = self.comm.sync_shared_state(self.shared, revision=0, strategy="receive_only")
                break
            except RETRYABLE as e:
                self.log(f"sync failed ({type(e).__name__}); voting again")
                self._vote()
        self.revision = info.revision
        self.log(f"joined at step {int(self.progress[0])} ({PHASE_NAMES[int(self.progress[1])]}), "
                 f"received {len(info.changed)} tensors, {info.bytes_received / 1e3:.1f} kB")
        return self.progress.clone()

    # ------------------------------------------------------------------ membership

    def _vote(self) -> None:
        while True:
            try:
                self.comm.update_topology()
                return
            except RETRYABLE:
                continue

    def vote_and_sync(self) -> None:
        """Admit the waiting, drop the dead, then share the state (newcomers receive it)."""
        before = self.comm.world_size
        while True:
            self._vote()
            try:
                info = self.comm.sync_shared_state(self.shared, revision=self.revision + 1)
            except RETRYABLE:
                continue
            self.revision = info.revision
            self.bytes_sent += info.bytes_sent
            break
        after = self.comm.world_size
        if after != before:
            self.log(f"world {before} -> {after}")

    def boundary(self, step: int, min_peers: int = 1, deadline: Optional[float] = None) -> None:
        """Collective at a step boundary (nothing in flight): admits waiting peers; with
        ``min_peers`` > 1, keeps admitting until the group has that many (use it at the first
        step only: after deaths the group may stay smaller)."""
        with self._membership():
            self.progress[0], self.progress[1] = step, BOUNDARY
            self._admit()
            self.grow(min_peers, deadline)

    def grow(self, min_peers: int, deadline: Optional[float] = None) -> None:
        """The tail of boundary(): a newcomer admitted at a boundary continues here.

        ``deadline`` (a time.monotonic() value; None: none): past it, TimeoutError naming
        min_peers and the count reached. While short of min_peers, says so (a warning on the
        logger) after GROW_FIRST_NOTICE_S, then every GROW_NOTICE_EVERY_S."""
        began = time.monotonic()
        notice_at = began + GROW_FIRST_NOTICE_S
        while self.comm.world_size < min_peers:
            now, have = time.monotonic(), self.comm.world_size
            if deadline is not None and now >= deadline:
                raise TimeoutError(f"DiLoCo.join(): min_peers={min_peers} not reached after {now - began:.0f} s: "
                                   f"the group has {have} peer(s); start the missing peers against the same master, "
                                   "or lower min_peers, or pass a longer join(timeout=...)")
            if now >= notice_at:
                self._notice(f"waiting for min_peers={min_peers}: the group has {have} after {now - began:.0f} s "
                             "(peers connecting to the same master are admitted within 0.05 s)")
                notice_at = now + GROW_NOTICE_EVERY_S
            time.sleep(0.05)
            self._admit()

    def log(self, line: str, level: int = logging.INFO) -> None:
        """A membership event, to the logger."""
        self.logger.log(level, line)

    def _notice(self, line: str) -> None:
        """A wait worth a person's attention: a warning."""
        self.log(line, logging.WARNING)

    def _admit(self) -> None:
        try:
            pending = self.comm.peers_pending()
        except RETRYABLE:
            pending = -1  # someone died: the vote drops it
        if pending:
            self.vote_and_sync()

    # ------------------------------------------------------------------ reductions

    def start_reduce(self, step: int, inputs: Sequence[torch.Tensor], weight: float,
                     quant: Quant = None, phase: int = REDUCE, leader: Sequence[int] = ()) -> PendingReduce:
        """Issues the weighted sum of ``inputs`` (kept intact) and returns at once. The inputs
        at the indices ``leader`` come back as group rank 0's values (module docstring)."""
        with self._waiting():
            return self._issue(PendingReduce(step, inputs, [], weight, quant, phase, leader))

    def finish_reduce(self, pending: PendingReduce) -> List[torch.Tensor]:
        """Waits for the reduction; through peer loss votes, syncs and reduces again. Returns
        the weighted means sum(w_i x_i) / sum(w_i), bit-identical on every peer."""
        with self._waiting():
            return self._settle(pending)

    def reduce(self, step: int, inputs: Sequence[torch.Tensor], weight: float,
               quant: Quant = None, leader: Sequence[int] = ()) -> List[torch.Tensor]:
        """start_reduce + finish_reduce (timed as one wait: nothing of it is hidden)."""
        with self._waiting():
            return self._settle(self._issue(PendingReduce(step, inputs, [], weight, quant, REDUCE, leader)))

    def mark_final(self, pending: PendingReduce) -> None:
        """Says, to a newcomer admitted while ``pending`` is retried, that no step follows it."""
        pending.phase = FINAL
        self.progress[1] = FINAL

    def _issue(self, template: PendingReduce) -> PendingReduce:
        """Issues ``template``'s reduction afresh (new outputs and handles): the first attempt
        and every retry in a re-formed ring (whose rank 0 may be another peer)."""
        t = template
        self.progress[0], self.progress[1] = t.step, t.phase
        pending = PendingReduce(t.step, t.inputs, [None] * len(t.inputs), t.weight, t.quant, t.phase, t.leader)
        pending.outputs = [x.empty_output() if isinstance(x, SparseContribution) else torch.empty_like(x)
                           for x in t.inputs]
        pending.weight_in.fill_(t.weight)
        pending.handles.append(self.comm.all_reduce_async(pending.weight_in, op="sum", out=pending.weight_out))
        quants = [t.quant] * len(t.inputs) if t.quant is None or isinstance(t.quant, str) else list(t.quant)
        for i, x in enumerate(t.inputs):
            if isinstance(x, SparseContribution):  # every peer's encoding to every peer, summed at _settle
                pending.handles.append(self.comm.all_gather_async(x.data, tag=1 + i))
                continue
            if i in t.leader and self.comm.rank != 0:
                x = torch.zeros_like(x)  # kept by the handle until it completes
            pending.handles.append(self.comm.all_reduce_async(x, op="sum", tag=1 + i, out=pending.outputs[i],
                                                              quant=quants[i]))
        return pending

    def _settle(self, pending: PendingReduce) -> List[torch.Tensor]:
        while True:
            error, longest = None, 0.0
            for handle in pending.handles:
                try:
                    info = handle.wait()
                    self.bytes_sent += info.bytes_sent
                    longest = max(longest, info.duration_s)
                except RETRYABLE as e:  # wait for every op: a vote needs none in flight
                    error = e
            self.time.reduce_s += longest  # its ops ran side by side
            if error is None:
                break
            self.log(f"reduce of step {pending.step} failed ({type(error).__name__}); re-forming the ring")
            with self._membership():
                self.vote_and_sync()
            pending = self._issue(pending)
        total = pending.total = self.last_total = float(pending.weight_out[0])
        for i, x in enumerate(pending.inputs):
            if isinstance(x, SparseContribution):
                out = pending.outputs[i]
                direct = out.dtype == torch.float32 and out.device.type == "cpu"  # else decode, then convert
                summed = decode_sum(pending.handles[1 + i].output, out if direct else torch.empty(x.numel))
                if not direct:
                    out.copy_(summed)
        for i, out in enumerate(pending.outputs):
            if i in pending.leader:
                continue
            if total:
                out.div_(total)
            else:  # nobody contributed (every weight 0): no change, rather than NaN
                out.zero_()
        return pending.outputs

    @contextmanager
    def _waiting(self) -> Iterator[None]:
        """Adds the block's time to waited_s, less what it spent on membership (counted there)."""
        began, membership = time.monotonic(), self.time.membership_s
        try:
            yield
        finally:
            self.time.waited_s += time.monotonic() - began - (self.time.membership_s - membership)

    @contextmanager
    def _membership(self) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.time.membership_s += time.monotonic() - began
