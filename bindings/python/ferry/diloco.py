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

**Time-boxed** (``inner_time=T``; for peers of unequal speed): the inner phase lasts T
seconds on each peer's own clock instead of H steps, every peer runs the steps that fit, and
``w_i`` is the work it did (``weight_by``: "steps", the default there, or "samples"), 0 below
``min_work``. A slow GPU then adds fewer steps instead of holding the others back; ``work``
shows each outer step's steps and share, and the master's /status and dashboard show it too
(``Communicator.set_label``; ``show_work``). With ``sync_every=H`` as well (recommended), H
caps the phase: it ends after T seconds or H steps, whichever comes first. Set T a little
above what a fast peer needs for H steps: when nobody is slow, every peer then runs exactly H
steps with equal weights, which *is* synchronous DiLoCo (no cost when nothing is slow), and
when the whole group speeds up, a phase still holds no more local drift than the H the run
was tuned for; the price is that a fast peer done with H steps waits out the rest of T at the
reduction. The cap is not the default because without an H there is nothing to cap at: T
alone is the pure time box. How the phase is timed, and why a skewed clock cannot stall the
group: ferry/work.py.

**Module buffers** (``sync_buffers=True``, the default): BatchNorm's running statistics and
the like travel with the outer step's reduction (float buffers: the weighted mean; integer
ones: the ring leader's; ferry/module_buffers.py) and are handed to newcomers, so every peer
ends each outer step with the same buffers too. With overlap they land with the reduction,
replacing the buffers' drift since its issue.

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
- ``sparse=SparseLoCo(...)`` (SparseLoCo, Sarfi et al., arXiv 2508.15706): each peer keeps an
  error-feedback accumulator in place of the outer momentum and sends only its chunk-wise
  top-k (2.1 % of each chunk of up to 32768 by default) at 2 bits, as an all-gather that every peer sums in rank
  order; plain outer SGD (lr SPARSE_OUTER_LR by default). The steps, and why a retry or a newcomer changes
  nothing of it: ferry/sparseloco.py. Joins, retries, fragments, overlap, time boxes and
  checkpoints work as for DiLoCo; the accumulator is in ``state_dict()``.

Differences from torchft's ``DiLoCo``/``LocalSGD`` (context managers that hook the inner
optimizer's ``step`` and take a user-built outer optimizer):

- ``step()`` is called explicitly (one line after ``inner_optimizer.step()``): optimizer
  step hooks need torch >= 2.0, and the call that may block on the network stays visible.
  ``with DiLoCo(...) as d`` is supported too (it joins the run on entry).
- The outer optimizer is built here (SGD, Nesterov): its momentum buffers must exist from
  the start so that a newcomer can receive them before its first outer step.
- A failed outer step is retried in the re-formed group, not discarded.
- ``state_dict()`` holds theta, the momentum, the counters, the model and the inner
  optimizer (and, overlapped, the reduction in flight): everything one peer needs to resume
  bit-identically.
- One class for every variant (options ``fragments``, ``overlap``, ``merge``, ``alpha``):
  F = 1 without overlap *is* DiLoCo, and every variant shares the joins, the retries and
  the checkpoints; only where a sync point puts its collectives differs.

**Fragments** (``fragments=F``; Streaming DiLoCo, Douillard et al., arXiv 2501.18512): the
parameters are cut into F fragments of whole top-level layers, each with its own theta and
momentum. Every H/F inner steps comes a *sync point*; the n-th syncs fragment (n - 1) mod F
alone, by the steps above. So each fragment syncs once every H inner steps, staggered, and
the bytes per sync point are a 1/F share of DiLoCo's: the same total, spread out in time.

**Overlap** (``overlap=True``; the overlapped outer step of Streaming DiLoCo, same paper;
with F = 1 it is "async DiLoCo", one outer step of delay): a sync point *issues* its
fragment's pseudo-gradient with ``all_reduce_async`` and returns; the all-reduce runs on
ferry's threads during the next H/F inner steps, and the next sync point waits for it,
applies the outer step and merges the local copy with the new theta:

    "progress": local = theta_new + (local - local_at_issue)   # keep what was learnt meanwhile
    "mix":      local = alpha * local + (1 - alpha) * theta_new  # Streaming DiLoCo's mixing

then, if it ends an outer step, comes its boundary (admissions; nothing is in flight
then), and its own issue. After
the loop, :meth:`finish` waits for the last reduction (a collective; a ``with`` block that
ends normally calls it). A newcomer admitted at
a boundary adds weight 0 to the reduction issued there; one admitted while a reduction is
retried adds weight 0 to it and to the next (it trained neither window); one admitted while
the last reduction is retried in finish() stops with the group (``ferry.elastic.FINAL``).

Checkpoints: ``state_dict()`` may be taken between any two ``step()`` calls; with overlap it
holds the reduction in flight (its input and weight) and each fragment's local copy at its
last issue. Every peer restores the same checkpoint step before ``join()``: a restored peer
that finds the group where its checkpoint stands keeps its own model and inner optimizer
(others are newcomers), and the reduction in flight is issued again with the same inputs.

Threads: one DiLoCo object belongs to one training thread; it makes collective calls on
its Communicator, which no other code may use for collectives meanwhile.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch

from . import diloco_checkpoint
from .communicator import Communicator
from .diloco_sync import SyncPoints
from .dtypes import parse_quant
from .durations import Duration, seconds
from .elastic import BOUNDARY, CommTime, ElasticGroup, Logger, PendingReduce, event_logger
from .errors import InvalidArgumentError, InvalidUsageError
from .legacy import legacy_call, warn_deprecated
from .module_buffers import ModuleBuffers
from .outer import MERGES, Fragment, OuterOptimizer, fragment_parameters, split_flat
from .shared_names import describe_shared, naming_mismatches
from .sparseloco import ErrorFeedback, SparseLoCo
from .work import TimeBox, WorkMeter, WorkStats

# join()'s default deadline (seconds): peers of one run usually start within minutes of each
# other; a wait past ten means a peer that will not come, better told than waited on forever.
JOIN_TIMEOUT_S = 600.0
# SparseLoCo's default outer lr. Its peers' top-k supports hardly overlap, so the mean of their
# contributions holds about 1/N of each entry sent: a larger lr makes that up. 7 was the best of
# 1-12 at 4 and 8 peers with decay 0.7-0.75 (tools/diloco-bench, text task; lr 1 ends +20 %
# above dense DiLoCo's loss).
SPARSE_OUTER_LR = 7.0

__all__ = ["CommTime", "DiLoCo", "OuterOptimizer", "SparseLoCo", "WorkStats", "split_flat"]


class DiLoCo(SyncPoints):
    """DiLoCo over a ferry Communicator, driven by one ``step()`` per inner step.

    Args (``comm``, ``model`` and ``inner_optimizer`` positional, the rest keyword-only; 0.3's
    positional forms still work with a DeprecationWarning):
        comm: a Communicator **not yet connected**: :meth:`join` connects it.
        model: the module being trained (its parameters are the local copy).
        inner_optimizer: the optimizer the caller steps (AdamW in the paper); it is only
            saved and restored here (its state stays local, as in DiLoCo).
        sync_every: H, inner steps per outer step (the paper: 500); with inner_time, the most
            inner steps a phase may hold (None: no cap; module docstring).
        outer_lr: the outer SGD's learning rate (None: the paper's 0.7; with sparse, SPARSE_OUTER_LR).
        outer_momentum: its Nesterov momentum (None: the paper's 0.9; with sparse, 0, and
            nothing else is allowed); 0 for plain SGD (the momentum then is not shared).
        quant: wire quantization of the pseudo-gradient all-reduce (None: full precision).
        min_peers: before the first outer interval, wait until the group has this many.
        logger: where membership events go, one record each (joins, world changes, retries at
            INFO; waits for peers at WARNING). Default: the "ferry.diloco" logger. ``log=``, a
            callable getting each line, is deprecated (0.3's form).
        fragments: Streaming DiLoCo's F (an int: the model's top-level layers cut into F
            runs of consecutive layers), or the fragments' parameter lists. Must divide H.
        overlap: run each outer all-reduce while the next H/F inner steps do (see the module
            docstring); then call :meth:`finish` after the loop.
        merge: with overlap, how the local copy meets the late outer weights: "progress" or
            "mix" (module docstring).
        alpha: the local share of "mix" (Streaming DiLoCo: 0.5).
        outer_device: where theta and the outer momentum live, and where the pseudo-gradient
            is formed and all-reduced from (None, the default: the model's device). A CUDA
            device keeps the outer step on the GPU: the all-reduce stages through pinned host
            memory on ferry's own stream (ferry.cuda_stage), beside the training stream; "cpu"
            keeps them in host memory, off the GPU's memory.
        inner_time: the time-boxed mode (instead of sync_every): seconds (or a timedelta) per
            outer step's inner phase (T/F per sync point), on ``clock``.
        weight_by: what a pseudo-gradient's weight counts: None (1 per trained peer; the
            default of the fixed schedule), "steps" (the time-boxed default) or "samples"
            (pass ``step(samples=N)``).
        min_work: below this many steps (samples) since its last sync, a peer's weight is 0.
        clock: the time-box clock (default time.monotonic; only this peer's durations count).
        sync_buffers: sync the model's buffers at every outer step (module docstring); False
            leaves each peer's its own.
        show_work: after every outer step, set this peer's label on the master's /status
            and dashboard to its work (``Communicator.set_label``, WorkStats.label()); None
            (default): in the time-boxed mode only. Never on the coordination path.
        sparse: SparseLoCo's options (ferry.diloco.SparseLoCo: density, chunk, bits, decay),
            or True for the defaults; None (default): DiLoCo's dense all-reduce. Excludes
            quant (the sparse codec quantizes itself).

    One class with options rather than a ``StreamingDiLoCo`` beside it: F = 1 without overlap
    *is* DiLoCo, and a second class would repeat every join, retry and checkpoint path.

    Raises InvalidArgumentError for bad options or a model whose parameters do not share one
    dtype and device (a fragment's pseudo-gradient travels as one flat tensor). ``step()``,
    ``join()`` and ``finish()`` raise what the Communicator raises that is not retryable
    (MasterLostError, KickedError, MismatchError, ...); retryable errors are handled inside.

    Every peer must use the same options and run the same number of outer steps; a peer that
    stops early is a lost peer to the others.
    """

    @legacy_call(positional=("sync_every", "outer_lr", "outer_momentum", "quant", "min_peers", "log", "fragments",
                             "overlap", "merge", "alpha", "outer_device", "inner_time", "weight_by", "min_work",
                             "clock", "sync_buffers", "show_work", "sparse"))
    def __init__(self, comm: Communicator, model: torch.nn.Module, inner_optimizer: torch.optim.Optimizer, *,
                 sync_every: Optional[int] = None, outer_lr: Optional[float] = None,
                 outer_momentum: Optional[float] = None, quant: Optional[str] = None, min_peers: int = 1,
                 fragments: Union[int, Sequence[Sequence[torch.nn.Parameter]]] = 1, overlap: bool = False,
                 merge: str = "progress", alpha: float = 0.5,
                 outer_device: Union[None, str, torch.device] = None, inner_time: Optional[Duration] = None,
                 weight_by: Optional[str] = None, min_work: float = 1, clock: Callable[[], float] = time.monotonic,
                 sync_buffers: bool = True, show_work: Optional[bool] = None,
                 sparse: Union[None, bool, SparseLoCo] = None, logger: Logger = None,
                 log: Optional[Callable[[str], None]] = None) -> None:
        if inner_time is not None:
            inner_time = seconds("inner_time", inner_time, positive=True)
            weight_by = weight_by or "steps"
        if (sync_every is not None or inner_time is None) and (
                not isinstance(sync_every, int) or isinstance(sync_every, bool) or sync_every < 1):
            what = "the most inner steps a time-boxed phase may hold" if inner_time is not None else "sync_every"
            raise InvalidArgumentError(f"{what} must be a positive int, got {sync_every!r}")
        parse_quant(quant)  # an unknown name fails here, not at the first outer step
        sparse = SparseLoCo() if sparse is True else (sparse or None)
        if sparse is not None:
            if not isinstance(sparse, SparseLoCo):
                raise InvalidArgumentError(f"sparse must be a ferry.diloco.SparseLoCo or True, got {sparse!r}")
            if quant is not None:
                raise InvalidArgumentError("sparse and quant exclude each other: SparseLoCo quantizes its top-k itself")
            if outer_momentum:
                raise InvalidArgumentError("SparseLoCo has no outer momentum (its error feedback takes that place): "
                                           f"leave outer_momentum unset, got {outer_momentum}")
        outer_lr = (SPARSE_OUTER_LR if sparse else 0.7) if outer_lr is None else outer_lr
        outer_momentum = (0.0 if sparse else 0.9) if outer_momentum is None else outer_momentum
        if not isinstance(min_peers, int) or min_peers < 1:
            raise InvalidArgumentError(f"min_peers must be a positive int, got {min_peers!r}")
        if outer_lr <= 0 or not 0 <= outer_momentum < 1:
            raise InvalidArgumentError(f"need outer_lr > 0 and 0 <= outer_momentum < 1, got {outer_lr}, {outer_momentum}")
        if merge not in MERGES or not 0 <= alpha <= 1:
            raise InvalidArgumentError(f"merge must be one of {MERGES} and 0 <= alpha <= 1, got {merge!r}, {alpha}")
        if merge != "progress" and not overlap:
            raise InvalidArgumentError("merge applies to late outer steps: it needs overlap=True")
        self.comm = comm
        self.model = model
        self.inner_optimizer = inner_optimizer
        self.sync_every = sync_every
        self.quant = quant
        self.min_peers = min_peers
        self.overlap, self.merge, self.alpha = overlap, merge, alpha
        self.params = list(model.parameters())
        if not self.params or len({(p.dtype, p.device) for p in self.params}) != 1:
            # One flat pseudo-gradient, one all-reduce per sync point: one dtype, one device.
            raise InvalidArgumentError("DiLoCo needs a model whose parameters share one dtype and device")
        lists = fragment_parameters(model, fragments)
        if sync_every is not None and sync_every % len(lists):
            raise InvalidArgumentError(f"sync_every ({sync_every}) must be a multiple of the fragments ({len(lists)})")
        # inner steps between sync points (fixed schedule), or the time box's seconds and its cap in steps
        self.period = None if sync_every is None or inner_time is not None else sync_every // len(lists)
        self.cap = None if sync_every is None or inner_time is None else sync_every // len(lists)
        self.show_work = inner_time is not None if show_work is None else bool(show_work)
        self.inner_time = inner_time
        self.box = TimeBox(None if inner_time is None else inner_time / len(lists), clock)
        self.meter = WorkMeter(len(lists), weight_by, min_work)
        prefix = (lambda i: "outer") if len(lists) == 1 else (lambda i: f"outer{i}")
        self.outer_device = torch.device(outer_device) if outer_device is not None else self.params[0].device
        self.fragments = [Fragment(f, outer_lr, outer_momentum, prefix(i), self.outer_device)
                          for i, f in enumerate(lists)]
        shared = {name: t for f in self.fragments for name, t in f.outer.shared().items()}
        self.buffers = ModuleBuffers(model, self.outer_device) if sync_buffers else None
        if self.buffers is not None:
            shared.update(self.buffers.named)
        self.names = describe_shared(model, self.fragments, self.buffers and self.buffers.names)
        self.sparse = sparse
        self.feedback = None if sparse is None else [ErrorFeedback(f.outer.numel(), sparse) for f in self.fragments]
        events = event_logger("DiLoCo", logger or logging.getLogger("ferry.diloco"), log)
        self.group = ElasticGroup(comm, shared, logger=events)
        self.synced = 0  # sync points done
        self.window_steps = 0  # inner steps since the last one
        self.outer_steps_began = 0  # inner steps into the run when the current outer step began
        self.steps_run = 0  # inner steps this peer ran (or was restored with)
        self.pending: Optional[PendingReduce] = None  # overlap: the reduction in flight
        self.owed: List[Callable[[], None]] = []  # a newcomer's share of the sync point it arrived in
        self.restored = False
        self.restored_elapsed = 0.0  # the time box's seconds at the checkpoint
        self.joined = False
        self.finished = False
        self.closed = False

    # ------------------------------------------------------------------ schedule

    @property
    def position(self) -> int:
        """Inner steps into the run as the fixed schedule counts them (sync points x H/F plus
        the steps since the last); time-boxed, the sync points done (a phase has no length
        in steps)."""
        return self.synced * self.period + self.window_steps if self.period else self.synced

    @property
    def outer_step(self) -> int:
        """Outer steps completed: every fragment synced this many times."""
        return self.synced // len(self.fragments)

    @property
    def inner_step(self) -> int:
        """Inner steps since the last outer step (time-boxed: this peer's)."""
        if self.period:
            return self.position % self.sync_every
        return self.steps_run - self.outer_steps_began

    @property
    def work(self) -> List[WorkStats]:
        """This peer's work per outer step, oldest first (the last 10,000): steps, samples,
        the weight it contributed, the group's total weight and the world."""
        return list(self.meter.log)

    def _set_synced(self, sync_points: int) -> None:
        self.synced, self.window_steps = sync_points, 0
        self.outer_steps_began = self.steps_run

    # ------------------------------------------------------------------ lifecycle

    def join(self, timeout: Optional[Duration] = JOIN_TIMEOUT_S) -> None:
        """Connects and takes this peer's place in the run: the first peer's theta starts the
        run; a newcomer receives theta, the momentum and the step, and its model is set to
        theta. A peer restored by load_state_dict() that finds the group where its checkpoint
        stands keeps its own state instead. Blocks until admitted (and, at step 0, until
        ``min_peers`` are there), at most ``timeout`` (seconds or a timedelta; default 600 s; None: no deadline;
        the ``with`` block uses the default), then raises ferry.TimeoutError naming min_peers
        and the count reached. While short of min_peers it says so after 5 s and every 30 s
        (a warning on the logger)."""
        if self.joined:
            raise InvalidUsageError("DiLoCo.join(): already joined")
        deadline = None if timeout is None else time.monotonic() + seconds("timeout", timeout)
        with naming_mismatches(self.names):
            progress = self.group.join(deadline)
            self.joined = True
            done = self.synced
            kept = progress is None or (self.restored and (int(progress[0]), int(progress[1])) == (done, BOUNDARY))
            if progress is None:
                self.group.boundary(done, self.min_peers, deadline)
                self._reissue()
            elif kept:
                self.group.grow(self.min_peers, deadline)  # as the first restored peer does
                self._reissue()
            else:
                self._arrive(int(progress[0]), int(progress[1]), deadline)
        # A peer that keeps its restored state resumes its phase where the checkpoint stood.
        self.box.restart(self.restored_elapsed if self.restored and kept else 0.0)

    def __enter__(self) -> "DiLoCo":
        if not self.joined:
            self.join()
        return self

    def __exit__(self, kind: Optional[type], *exc: object) -> None:
        """Releases what the block took. A block that ends normally first finishes the run
        (finish(), a collective: every peer's block ends after the same outer step), so no
        reduction is left in flight and every peer keeps theta; its errors are raised. A
        block left by an exception finishes nothing (a collective then could wait on peers
        that are not coming). Either way :meth:`close` then leaves the run."""
        try:
            if kind is None and self.joined and not self.finished:
                self.finish()
        finally:
            self.close()

    def close(self) -> None:
        """Leaves the run: closes the Communicator that :meth:`join` connected (the others'
        next collective fails with PeerLostError and they go on without this peer), which
        settles the reduction still in flight and lets go of its tensors. Idempotent; the
        outer weights, the model and state_dict() stay readable; step() and finish() then
        raise InvalidUsageError. Blocks at most what Communicator.close() does (~2.5 s)."""
        self.closed = True
        self.pending, self.owed = None, []
        self.comm.close()

    def finish(self) -> None:
        """Ends the run (a collective: every peer calls it after the same outer step): waits for
        the reduction in flight (overlap) and applies it, then sets the model to theta, the
        outer weights, bit-identical on every peer."""
        if not self.joined:
            raise InvalidUsageError("DiLoCo.finish() before join()")
        if self.closed:
            raise InvalidUsageError("DiLoCo.finish() after close()")
        with naming_mismatches(self.names):
            self._settle_owed()
            if self.pending is not None:
                self.group.mark_final(self.pending)
                self._finish_pending()
        for f in self.fragments:
            f.outer.load_into(f.params)
        self.finished = True

    # ------------------------------------------------------------------ training

    def step(self, samples: Optional[int] = None) -> bool:
        """Call once after every ``inner_optimizer.step()`` (``samples``: the batch's, with
        weight_by="samples"). The call that ends a phase (every H/F-th; time-boxed, the first
        after T/F seconds) is a sync point (a collective; blocks through re-forms after a peer
        loss). Returns True when it completes an outer step (every F-th sync point); with one
        fragment and no overlap the model then holds the new theta. Other calls return False
        at once."""
        if not self.joined:
            raise InvalidUsageError("DiLoCo.step() before join() (or `with DiLoCo(...)`)")
        if self.closed:
            raise InvalidUsageError("DiLoCo.step() after close() (or the end of its `with` block)")
        if self.owed:
            self._settle_owed()
            self.box.restart()
        self.meter.add(self.outer_step, samples)
        self.steps_run += 1
        self.window_steps += 1
        if self.period is not None:
            due = self.window_steps == self.period
        else:
            due = self.box.due() or (self.cap is not None and self.window_steps >= self.cap)
        if not due:
            return False
        sync_point = self.synced + 1
        self.synced, self.window_steps = sync_point, 0
        ends_outer_step = sync_point % len(self.fragments) == 0
        if ends_outer_step:
            self.outer_steps_began = self.steps_run
        with naming_mismatches(self.names):
            if self.overlap:
                self._overlapped_sync(sync_point)
            else:
                self._blocking_sync(sync_point, self.meter.take((sync_point - 1) % len(self.fragments)))
        self.box.restart()
        return ends_outer_step

    @property
    def outer_params(self) -> List[torch.Tensor]:
        """theta, the outer parameters fragment by fragment (bit-identical on every peer after
        each sync point)."""
        return [p for f in self.fragments for p in f.outer.params]

    @property
    def outer_momentum_buffers(self) -> List[torch.Tensor]:
        """The outer Nesterov momentum buffers, in the order of outer_params."""
        return [b for f in self.fragments for b in f.outer.buffers]

    @property
    def outer_momentum(self) -> List[torch.Tensor]:
        """Deprecated (the 0.3 name): :attr:`outer_momentum_buffers` (``outer_momentum`` is the float argument)."""
        warn_deprecated("DiLoCo.outer_momentum (the buffers) is now outer_momentum_buffers")
        return self.outer_momentum_buffers

    @property
    def bytes_sent(self) -> int:
        """Wire bytes this peer sent: all-reduce payload and shared state served."""
        return self.group.bytes_sent

    @property
    def comm_time(self) -> CommTime:
        """Where this peer's time in the run's collectives went (live, summed since join()):
        ``reduce_s`` the outer all-reduces took, ``hidden_s`` of it behind inner steps (with
        overlap), ``exposed_s`` the training loop lost to them and to admissions."""
        return self.group.time

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> Dict[str, Any]:
        """Everything needed to resume bit-identically: theta, the outer momentum, the
        counters (time-boxed: the phase's elapsed time and the work since each fragment's
        sync), the model (the local copy), the inner optimizer and, with overlap, the
        reduction in flight (its inputs and weight) and each fragment's snapshot at its last
        issue. Tensors are copies. Take it between step() calls, after this peer's first."""
        return diloco_checkpoint.save(self)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restores what state_dict() saved, in place (the tensors ferry syncs stay the same
        objects). Call it before join(): the first peer's restored theta then starts the run,
        and a newcomer's is replaced by the group's. The whole group restarts from one
        checkpoint step (sync point); each restored peer reissues the reduction it had in
        flight."""
        diloco_checkpoint.restore(self, state)
