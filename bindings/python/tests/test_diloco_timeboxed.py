"""Time-boxed DiLoCo (issue 40): inner phases bounded by time, pseudo-gradients weighted by
the work each peer did. The exact tests run on virtual clocks (each peer's clock advances by
its own cost per inner step: a peer of cost 2 is a GPU half as fast), so step counts, and so
the weights, are known in advance: the outer step against a hand reference with unequal
weights and a weight-0 peer below min_work, bit-identical peers with unequal step counts in
every mode, resume from state_dict mid-phase. Real clocks for the rest: a peer killed
mid-phase, a newcomer admitted mid-phase, and peers whose clocks are skewed."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

import pytest
import torch

import ferry
from diloco_peer import OUTER_LR, OUTER_MOMENTUM, PEER_ARGS, Vector, gradient
from ferry.diloco import DiLoCo, OuterOptimizer
from harness import HERE, child_env, collecting_logger, reap, run_threads, run_with_own_master
from timeboxed_peer import STEP_S, timeboxed_toy, toy_step
from watch_http import status, wait_for


def bits(tensors) -> bytes:
    return b"".join(t.detach().contiguous().numpy().tobytes() for t in tensors)


class VirtualClock:
    """A clock that moves only when the peer does an inner step: by its cost."""

    def __init__(self, cost: float) -> None:
        self.now, self.cost = 0.0, cost

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.cost


def hand_reference(steps, weights, outer_steps):
    """The toy's theta after outer_steps outer steps in which peer i runs steps[i] inner steps
    and weighs its pseudo-gradient by weights[i]: theta - lr (d + m b), d = sum w_i d_i / sum w_i."""
    outer = OuterOptimizer([torch.zeros(4)], OUTER_LR, OUTER_MOMENTUM)
    for t in range(outer_steps):
        total = torch.zeros(4)
        for shard in range(len(steps)):
            local = outer.params[0].clone()
            for i in range(steps[shard]):
                local.add_(gradient(shard, t * steps[shard] + i), alpha=-1.0)
            total += (outer.params[0] - local) * weights[shard]
        outer.step(total.div_(sum(weights)))
    return outer.params[0]


def test_weighted_outer_step_against_a_hand_reference(address):
    """Three peers of costs 1, 2, 5 and a box of 4: they run 4, 2 and 1 inner steps per phase;
    with min_work 2 their weights are 4, 2 and 0. theta follows
    theta - lr (d + m b), d = (4 d_0 + 2 d_1 + 0 d_2) / 6, bit for bit."""
    costs, outer_steps = (1, 2, 5), 2

    def body(shard):
        clock = VirtualClock(costs[shard])
        with ferry.Communicator(address, **PEER_ARGS) as comm, \
                timeboxed_toy(comm, inner_time=4, min_work=2, clock=clock, min_peers=3) as diloco:
            k, returned = 0, []
            while diloco.outer_step < outer_steps:
                returned.append(toy_step(diloco, shard, k, clock.tick))
                k += 1
            return returned, diloco.outer_params[0].clone(), diloco.work

    results = run_threads(3, body)
    steps, weights = (4, 2, 1), (4.0, 2.0, 0.0)
    reference = hand_reference(steps, weights, outer_steps)
    assert reference.abs().sum() > 0
    for shard, (returned, theta, work) in enumerate(results):
        assert returned == ([False] * (steps[shard] - 1) + [True]) * outer_steps
        assert torch.equal(theta, reference), (theta, reference)
        assert [(w.outer_step, w.steps, w.weight, w.group_weight, w.world) for w in work] == \
            [(t, steps[shard], weights[shard], 6.0, 3) for t in range(outer_steps)]
    assert results[0][2][0].share == pytest.approx(4 / 6) and results[2][2][0].share == 0


def test_a_capped_phase_ends_at_h_steps_and_shows_its_work(watched):
    """sync_every=H with inner_time caps a phase at H steps: peers of costs 1, 1 and 2 with a
    box of 4 and H = 3 run 3, 3 and 2 steps (the fast ones stop at the cap, the slow one at the
    box), weighted 3, 3 and 2, bit for bit against the hand reference. Each peer's label on the
    master's /status shows its last outer step's work (show_work, on by default here)."""
    master, base = watched
    address = f"127.0.0.1:{master.port}"
    costs, outer_steps, steps = (1, 1, 2), 2, (3, 3, 2)

    def body(shard):
        clock = VirtualClock(costs[shard])
        with ferry.Communicator(address, **PEER_ARGS) as comm, \
                timeboxed_toy(comm, inner_time=4, cap=3, clock=clock, min_peers=3) as diloco:
            k = 0
            while diloco.outer_step < outer_steps:
                toy_step(diloco, shard, k, clock.tick)
                k += 1
            me = comm.peer_id
            want = f"outer {outer_steps - 1}: {steps[shard]} steps, 0 samples, share {steps[shard] * 100 / 8:.0f}% of 3"
            wait_for("this peer's work on /status", lambda: any(
                p["id"] == me and p["label"] == want for p in status(base)["peers"]))
            comm.barrier()  # nobody leaves (and drops off /status) before every label was seen
            return diloco.outer_params[0].clone(), [(w.steps, w.weight) for w in diloco.work]

    results = run_threads(3, body)
    reference = hand_reference(steps, [float(s) for s in steps], outer_steps)
    for shard, (theta, work) in enumerate(results):
        assert torch.equal(theta, reference), (theta, reference)
        assert work == [(steps[shard], float(steps[shard]))] * outer_steps


def test_a_capped_phase_at_equal_speeds_is_synchronous_diloco():
    """Equal costs and a box nobody fills: every phase ends at the cap, H steps on every peer
    with equal weights: the fixed schedule's theta (the weighted mean divides H d_i by n H:
    the same mean, up to rounding)."""
    def run(timeboxed):
        with ferry.Master("127.0.0.1:0") as master:
            def body(shard):
                clock = VirtualClock(1)
                with ferry.Communicator(f"127.0.0.1:{master.port}", **PEER_ARGS) as comm:
                    model = Vector(1)
                    inner = torch.optim.SGD(model.parameters(), lr=1.0)
                    schedule = dict(inner_time=100, clock=clock) if timeboxed else {}
                    with DiLoCo(comm, model, inner, sync_every=3, outer_lr=OUTER_LR, outer_momentum=OUTER_MOMENTUM,
                                min_peers=2, **schedule) as diloco:
                        k = 0
                        while diloco.outer_step < 3:
                            toy_step(diloco, shard, k, clock.tick)
                            k += 1
                        return diloco.outer_params[0].clone(), [w.steps for w in diloco.work]
            return run_threads(2, body)

    fixed, boxed = run(False), run(True)
    for (theta_f, steps_f), (theta_b, steps_b) in zip(fixed, boxed):
        assert steps_f == steps_b == [3, 3, 3]
        assert torch.allclose(theta_b, theta_f, rtol=1e-6, atol=1e-7), (theta_b, theta_f)


def mlp_peer(address, shard, options, costs=(1, 2, 3), outer_steps=3, batch=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    inner = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(100 + shard)
    clock = VirtualClock(costs[shard])
    samples = (batch or 16) + 4 * shard
    with ferry.Communicator(address, **PEER_ARGS) as comm:
        with DiLoCo(comm, model, inner, inner_time=6, clock=clock, min_peers=len(costs), **options) as diloco:
            while diloco.outer_step < outer_steps:
                x = torch.randn(samples, 8, generator=data)
                loss = torch.nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long())
                inner.zero_grad()
                loss.backward()
                inner.step()
                clock.tick()
                diloco.step(samples=samples)
        return bits(diloco.outer_params), bits(model.parameters()), [w.steps for w in diloco.work]


@pytest.mark.parametrize("options", [
    {}, dict(quant="u8"), dict(weight_by="samples"), dict(overlap=True),
    dict(fragments=2, overlap=True), dict(fragments=2, quant="u8"),
], ids=["plain", "u8", "samples", "overlap", "streaming", "fragments-u8"])
def test_peers_with_unequal_step_counts_end_bit_identical(address, options):
    results = run_threads(3, lambda shard: mlp_peer(address, shard, options))
    assert len({outer for outer, _, _ in results}) == 1
    assert all(local == outer for outer, local, _ in results)  # the with block's finish()
    counts = [steps for _, _, steps in results]
    assert counts[0][0] > counts[1][0] > counts[2][0] > 0, counts  # unequal work, all of it used


@pytest.mark.parametrize("options", [{}, dict(fragments=2, overlap=True)], ids=["blocking", "streaming-overlapped"])
def test_state_dict_resumes_a_phase_bit_identically(options):
    """Two peers (costs 1 and 1.5) run 3 outer steps straight; two others save mid-phase (one
    inner step into outer step 1's first phase, at the same sync point), load into fresh objects (new clocks) and run on: same bits.
    The checkpoint keeps the phase's elapsed time and the work since each fragment's sync."""
    costs = (1, 1.5)  # 4 and 3 inner steps per box of 4 (2 and 2 per fragment's half box)

    def run(address, shard, stop=False, state=None):
        clock = VirtualClock(costs[shard])
        with ferry.Communicator(address, **PEER_ARGS) as comm:
            diloco = timeboxed_toy(comm, layers=2, inner_time=4, clock=clock, min_peers=2, **options)
            k = 0
            if state is not None:
                saved = torch.load(io.BytesIO(state))
                diloco.load_state_dict(saved["diloco"])
                k = saved["k"]
            diloco.join()
            while diloco.outer_step < 3:
                if stop and diloco.synced == len(diloco.fragments) and diloco.window_steps == 1:
                    out = io.BytesIO()
                    torch.save({"diloco": diloco.state_dict(), "k": k}, out)
                    return out.getvalue()
                toy_step(diloco, shard, k, clock.tick)
                k += 1
            diloco.finish()
            return bits(diloco.outer_params + diloco.outer_momentum_buffers + list(diloco.model.parameters()))

    straight = run_with_own_master(2, run)
    saved = run_with_own_master(2, lambda a, s: run(a, s, stop=True))
    resumed = run_with_own_master(2, lambda a, s: run(a, s, state=saved[s]))
    assert straight[0] == straight[1] == resumed[0] == resumed[1]


def real_peer(address, shard, outer_steps, clock=time.monotonic, min_peers=2, logger=None, joined=None,
              step_s=STEP_S, on_outer_step=lambda: None):
    with ferry.Communicator(address, **PEER_ARGS) as comm, \
            timeboxed_toy(comm, clock=clock, min_peers=min_peers, logger=logger) as diloco:
        if joined is not None:
            joined.set()
        k = 0
        while diloco.outer_step < outer_steps:
            time.sleep(step_s)
            if toy_step(diloco, shard, k):
                on_outer_step()
            k += 1
        return bits(diloco.outer_params + diloco.outer_momentum_buffers), diloco.work, comm.world_size


@pytest.mark.deadline(90)
def test_a_peer_killed_mid_phase(address):
    """Three peers; the process kills itself three inner steps into outer step 1's phase. The
    two survivors run on (their reduction fails or starts without it, and they re-form) and
    end outer step 4 bit-identical, in a world of 2."""
    child = subprocess.Popen([sys.executable, str(HERE / "timeboxed_peer.py"), address, "3", "5", "1", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    try:
        results = run_threads(2, lambda shard: real_peer(address, shard, 4, min_peers=3), timeout_s=60)
        assert child.wait(10) == -9
    finally:
        reap(child)
    (a, work_a, world_a), (b, _, world_b) = results
    assert a == b and world_a == world_b == 2
    assert [w.world for w in work_a][-1] == 2 and all(w.steps > 0 for w in work_a)


@pytest.mark.deadline(90)
def test_a_newcomer_admitted_mid_phase(address):
    """Two peers train; a third connects during outer step 1's phase, is admitted at the next
    boundary with theta and the momentum, trains (its work counted with weight > 0) and ends
    bit-identical with the others."""
    first_done = threading.Event()
    logger, logs = collecting_logger()

    def body(shard):
        if shard == 2:
            first_done.wait(20)
            time.sleep(0.05)  # inside the next phase
            return real_peer(address, shard, 5, min_peers=1, logger=logger)
        return real_peer(address, shard, 5, on_outer_step=first_done.set)

    (a, _, _), (b, _, _), (c, work, world) = run_threads(3, body, timeout_s=60)
    assert a == b == c and world == 3
    assert any("joined at step" in line for line in logs), logs
    assert work[0].outer_step >= 1 and any(w.weight > 0 and w.world == 3 for w in work), work


def test_skewed_clocks_cannot_stall_the_group(address):
    """Deadlines are durations on each peer's own clock, measured from the moment its last
    sync point returned; no peer reads another's. One peer's clock is a year ahead, another's
    runs 1.5x fast: all three still sync every phase, each with work of its own, and end
    bit-identical. (A deadline shared as a wall-clock time would have left the year-ahead
    peer syncing after every step, and a peer a year behind waiting for a year.)"""
    clocks = (time.monotonic, lambda: time.monotonic() + 365 * 86400, lambda: 1.5 * time.monotonic())
    results = run_threads(3, lambda shard: real_peer(address, shard, 3, clock=clocks[shard], min_peers=3),
                          timeout_s=40)
    assert len({r[0] for r in results}) == 1
    for _, work, world in results:
        assert world == 3 and len(work) == 3
        assert all(w.steps >= 3 and w.weight == w.steps for w in work), work
