"""ferry.diloco: the outer step's math against a hand-computed Nesterov reference (whole model
and per fragment, blocking and overlapped), the fragments' schedule, bit-identical peers (full
precision and quantized, every mode), checkpoint and resume (with a reduction in flight), a
newcomer, a peer killed inside an outer all-reduce (the survivors' weights equal a replay
without the dead peer), and the accounting of time spent in collectives."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

import pytest
import torch

import ferry
from diloco_peer import PEER_ARGS, SYNC_EVERY, bits, gradient, inner_step, replay, tiny_mlp_peer, toy
from ferry.diloco import DiLoCo
from harness import HERE, child_env, collecting_logger, reap, run_threads, run_with_own_master


def test_import_ferry_does_not_import_diloco():
    done = subprocess.run([sys.executable, "-c", "import sys, ferry; print('ferry.diloco' in sys.modules, "
                           "'torch' in sys.modules)"], env=child_env(), capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_outer_step_is_nesterov_sgd_on_the_mean_pseudo_gradient(address):
    """Two peers, 2 outer steps; the reference is written out by hand (lr 0.5, momentum 0.5)."""

    def body(shard):
        with ferry.Communicator(address, **PEER_ARGS) as comm, toy(comm, min_peers=2) as diloco:
            returned = [inner_step(diloco, shard) for _ in range(2 * SYNC_EVERY)]
            return returned, diloco.outer_params[0].clone(), diloco.model.w.detach().clone()

    results = run_threads(2, body)
    lr, m = 0.5, 0.5
    theta, b = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64)
    for t in range(2):
        # delta_i = theta - (theta - sum of the interval's gradients), averaged over the peers
        delta = sum(sum(gradient(s, t * SYNC_EVERY + i).double() for i in range(SYNC_EVERY)) for s in (0, 1)) / 2
        b = m * b + delta
        theta = theta - lr * (delta + m * b)
    assert theta.abs().sum() > 0
    for returned, outer, local in results:
        assert returned == [False, False, True] * 2
        assert torch.equal(outer.double(), theta)  # every value is exact in float32 here
        assert torch.equal(local, outer)  # the model restarts from theta


def sync_positions(fragment: int, fragments: int, sync_every: int, steps: int):
    """Where fragment `fragment` issues its reductions: H/F inner steps in for fragment 0,
    H/F later for each next one (staggered), then every H."""
    first = (fragment + 1) * sync_every // fragments
    return list(range(first, steps + 1, sync_every))


@pytest.mark.parametrize("overlap", [False, True], ids=["blocking", "overlapped"])
def test_fragment_outer_steps_against_a_hand_reference(address, overlap):
    """Two peers, two layers in two fragments, H = 4, 2 outer steps. Each fragment's theta and
    momentum are computed by hand from the gradients of its own windows of inner steps (the
    toy's gradients ignore the weights, so the overlapped "progress" merge keeps each window's
    gradients whole and lands on the same values as blocking)."""
    fragments, sync_every, outer_steps = 2, 4, 2

    def body(shard):
        with ferry.Communicator(address, **PEER_ARGS) as comm, \
                toy(comm, layers=2, sync_every=sync_every, min_peers=2, fragments=fragments,
                    overlap=overlap) as diloco:
            returned = [inner_step(diloco, shard) for _ in range(outer_steps * sync_every)]
            diloco.finish()
            return returned, [t.clone() for t in diloco.outer_params + diloco.outer_momentum_buffers]

    results = run_threads(2, body)
    lr, m = 0.5, 0.5
    expected = []
    for layer in range(fragments):
        theta, b, start = torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float64), 0
        for end in sync_positions(layer, fragments, sync_every, outer_steps * sync_every):
            delta = sum(gradient(s, i, layer=layer).double() for s in (0, 1) for i in range(start, end)) / 2
            b = m * b + delta
            theta = theta - lr * (delta + m * b)
            start = end
        expected.append((theta, b))
    assert not torch.equal(expected[0][0], expected[1][0])
    for returned, (theta0, theta1, b0, b1) in results:
        assert returned == [False, False, False, True] * 2
        assert torch.equal(theta0.double(), expected[0][0]) and torch.equal(b0.double(), expected[0][1])
        assert torch.equal(theta1.double(), expected[1][0]) and torch.equal(b1.double(), expected[1][1])


@pytest.mark.parametrize("fragments,overlap", [(3, False), (3, True), (2, True)])
def test_each_fragment_syncs_once_every_h_inner_steps(address, fragments, overlap):
    """Three layers; after every inner step, which fragments' outer weights changed (each
    change is one applied reduction). Fragment j must change exactly at its staggered sync
    positions, one sync point (H/F steps) later when overlapped, the last one in finish()."""
    sync_every, outer_steps = 6, 3
    steps = outer_steps * sync_every

    def body(shard):
        with ferry.Communicator(address, **PEER_ARGS) as comm, \
                toy(comm, layers=3, sync_every=sync_every, min_peers=2, fragments=fragments,
                    overlap=overlap) as diloco:
            changes = {j: [] for j in range(fragments)}

            def note(position):
                for j, f in enumerate(diloco.fragments):
                    now = bits(f.outer.params)
                    if now != seen[j]:
                        changes[j].append(position)
                        seen[j] = now

            seen = [bits(f.outer.params) for f in diloco.fragments]
            for position in range(1, steps + 1):
                inner_step(diloco, shard)
                note(position)
            diloco.finish()
            note("finish")
            return changes

    period = sync_every // fragments
    expected = {}
    for j in range(fragments):
        issued = sync_positions(j, fragments, sync_every, steps)
        assert len(issued) == outer_steps
        expected[j] = [p + period if p + period <= steps else "finish" for p in issued] if overlap else issued
    for changes in run_threads(2, body):
        assert changes == expected


@pytest.mark.parametrize("world,quant,options", [
    (2, None, {}), (3, None, {}), (3, "u8", {}),
    (2, None, dict(overlap=True)),
    (3, None, dict(fragments=2, overlap=True, merge="mix", alpha=0.5)),
    (3, "u8", dict(fragments=2, overlap=True)),
    (3, None, dict(fragments=2)),
], ids=["2", "3", "3-u8", "2-overlap", "3-streaming-mix", "3-streaming-u8", "3-fragments"])
def test_peers_end_with_bit_identical_weights(address, world, quant, options):
    results = run_threads(world, lambda shard: tiny_mlp_peer(address, shard, world, 3, quant, **options))
    assert len({outer for outer, _, _ in results}) == 1
    assert all(local == outer for outer, local, _ in results)  # finish() leaves theta in the model
    # Only plain DiLoCo ends an outer step with local == theta; with overlap or fragments
    # (staggered), the local copies hold progress that theta lacks until finish().
    plain = not options.get("overlap") and options.get("fragments", 1) == 1
    assert all((before == outer) == plain for outer, _, before in results)


@pytest.mark.parametrize("overlap", [False, True], ids=["blocking", "overlapped"])
def test_comm_time_says_how_much_of_the_outer_all_reduce_was_hidden(address, overlap):
    """Blocking, the loop waits for every reduction from its call to its commit, so nothing
    is hidden; overlapped, with inner steps that take a while, the reductions run behind them."""

    def body(shard):
        # 4 M parameters: a reduction of a few floats takes about as long as issuing it, so
        # "some of it was hidden" would be a coin flip on a loaded machine; 16 MB takes longer.
        model = torch.nn.Linear(1 << 11, 1 << 11, bias=False)
        inner = torch.optim.SGD(model.parameters(), lr=0.01)
        with ferry.Communicator(address, **PEER_ARGS) as comm, \
                DiLoCo(comm, model, inner, sync_every=SYNC_EVERY, min_peers=2, overlap=overlap) as diloco:
            for _ in range(3 * SYNC_EVERY):
                if overlap:
                    time.sleep(0.05)  # the inner step's compute
                model.weight.grad = torch.full_like(model.weight, shard + 1.0)
                inner.step()
                diloco.step()
            diloco.finish()
            return diloco.comm_time

    for t in run_threads(2, body):
        assert t.reduce_s > 0
        assert t.exposed_s >= t.waited_s > 0
        if overlap:
            assert t.hidden_s > 0
        else:
            assert t.waited_s >= t.reduce_s and t.hidden_s == 0


@pytest.mark.parametrize("layers,options", [
    (1, dict(sync_every=SYNC_EVERY)),
    (2, dict(sync_every=4, fragments=2)),
    (2, dict(sync_every=4, fragments=2, overlap=True)),
], ids=["diloco", "fragments", "streaming-overlapped"])
def test_state_dict_round_trips_and_resumes_bit_identically(layers, options):
    """Two peers run 3 outer steps straight; two others stop after 1 outer step and 1 inner
    step, save (through torch.save), load into fresh objects, and run on: same bits. The inner
    SGD has momentum (state a resumed peer must keep); overlapped, the checkpoint holds the
    reduction in flight, which the resumed peers issue again."""

    def run(address, shard, stop_at=None, state=None):
        with ferry.Communicator(address, **PEER_ARGS) as comm:
            diloco = toy(comm, layers, inner_momentum=0.5, min_peers=2, **options)
            if state is not None:
                diloco.load_state_dict(torch.load(io.BytesIO(state)))
            diloco.join()
            while diloco.outer_step < 3:
                if (diloco.outer_step, diloco.inner_step) == stop_at:
                    saved = io.BytesIO()
                    torch.save(diloco.state_dict(), saved)
                    assert (diloco.state_dict().get("in_flight") is not None) == bool(options.get("overlap"))
                    return saved.getvalue()
                inner_step(diloco, shard)
            diloco.finish()
            return bits(diloco.outer_params + diloco.outer_momentum_buffers + list(diloco.model.parameters()))

    straight = run_with_own_master(2, run)
    saved = run_with_own_master(2, lambda a, s: run(a, s, stop_at=(1, 1)))
    resumed = run_with_own_master(2, lambda a, s: run(a, s, state=saved[s]))
    assert straight[0] == straight[1] == resumed[0] == resumed[1]


MODES = {  # toy(layers, **options) settings: plain DiLoCo, and Streaming DiLoCo overlapped
    "diloco": (1, dict(sync_every=SYNC_EVERY)),
    "streaming-overlapped": (2, dict(sync_every=4, fragments=2, overlap=True)),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_a_newcomer_receives_the_outer_model_and_momentum(address, mode):
    """Two peers train; a third connects after their first outer step and is handed theta and
    the momentum (of every fragment) at a boundary; all three end with bit-identical outer
    state."""
    layers, options = MODES[mode]
    outer_steps = 4
    seen = {}  # sync point -> the members' (theta, momentum) bits after it
    first_done = threading.Event()

    def body(shard):
        if shard == 2:
            first_done.wait(20)
        with ferry.Communicator(address, **PEER_ARGS) as comm, \
                toy(comm, layers, min_peers=2 if shard < 2 else 1, **options) as diloco:
            if shard == 2:
                joined = (diloco.position // diloco.period, bits(diloco.outer_params + diloco.outer_momentum_buffers))
            while diloco.outer_step < outer_steps:
                outer_done = inner_step(diloco, shard)
                if shard < 2 and diloco.position % diloco.period == 0:
                    seen[diloco.position // diloco.period] = bits(diloco.outer_params + diloco.outer_momentum_buffers)
                if shard < 2 and outer_done:
                    first_done.set()
                    time.sleep(0.3)  # leave the newcomer time to arrive mid-run
            diloco.finish()
            final = bits(diloco.outer_params + diloco.outer_momentum_buffers)
            return final if shard < 2 else (final, joined, diloco.group.comm.world_size)

    a, b, (c, (joined_at, joined_state), world) = run_threads(3, body)
    assert a == b == c and world == 3
    assert 1 <= joined_at < max(seen)  # mid-run
    assert joined_state == seen[joined_at]  # received, not its own zeros
    momentum = torch.frombuffer(bytearray(joined_state), dtype=torch.float32)[4 * layers:]
    assert any(momentum != 0)  # momentum too


KILL_MODES = {  # name: (layers, options, outer steps, the outer step the process dies in, replay-checked)
    "diloco": (1, dict(sync_every=SYNC_EVERY), 4, 2, True),
    "overlapped": (1, dict(sync_every=SYNC_EVERY, overlap=True), 5, 2, True),
    # the last reduction, drained by finish(): a newcomer admitted there has nothing left to do
    "overlapped-last": (1, dict(sync_every=SYNC_EVERY, overlap=True), 3, 2, True),
    "fragments": (2, dict(sync_every=4, fragments=2), 4, 2, False),
    "streaming-overlapped": (2, dict(sync_every=4, fragments=2, overlap=True), 4, 2, False),
}


@pytest.mark.deadline(90)
@pytest.mark.parametrize("newcomer", [False, True], ids=["kill", "kill-and-join"])
@pytest.mark.parametrize("mode", list(KILL_MODES))
def test_a_peer_killed_inside_an_outer_all_reduce_leaves_no_partial_update(address, mode, newcomer):
    """Three peers (one a process); at outer step 2 the process enters the all-reduce and is
    SIGKILLed there. The survivors redo the step between themselves: their weights equal a
    replay in which steps 0-1 average shards {0,1,2} and steps 2-3 average {0,1}, bit for bit.

    kill-and-join: a fourth peer connects while the others wait in that all-reduce; the vote
    after the failure admits it mid-reduction, so it joins the retried reduction with weight 0
    (adding nothing) and trains from step 3: step 3 averages {0,1,3}.

    Overlapped, the process dies where it would issue outer step 2's reduction (after the
    boundary), the survivors find it failed when they wait for it H/F inner steps later, and
    a newcomer (started once the process is dead) is admitted by that retry's vote: it adds
    weight 0 to the retried reduction and to the one issued as it arrives (it trained
    neither window), then trains; with one fragment the replay is the blocking one (the toy's
    gradients ignore the weights, so the "progress" merge keeps every window whole), with one
    more window of {0,1}. With two fragments (blocking or overlapped) the check is
    bit-identity of all survivors.
    overlapped-last: the failing reduction is the last, waited in finish(); the newcomer
    admitted there learns it is the final one and stops with the group."""
    layers, options, outer_steps, die_at, replayed = KILL_MODES[mode]
    overlap, sync_every, fragments = options.get("overlap", False), options["sync_every"], options.get("fragments", 1)
    diverge = die_at * sync_every
    # the failing reduction's step in the logs: its sync point's number, or the one before blocking
    label = (die_at + 1) * fragments - (0 if overlap else 1)
    pause_at = (die_at + 1) * sync_every + sync_every // fragments - 1 if overlap else (die_at + 1) * sync_every - 1
    pause_at = min(pause_at, outer_steps * sync_every)  # the last reduction is waited in finish()
    child = subprocess.Popen([sys.executable, str(HERE / "diloco_peer.py"), address, "3", str(outer_steps),
                              str(die_at), "2", str(layers), str(fragments), str(int(overlap)), str(sync_every)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
    (survivors, logs), (newcomer_logger, newcomer_logs) = collecting_logger(), collecting_logger()
    waiting = threading.Event()
    if overlap:
        threading.Thread(target=lambda: (child.wait(), waiting.set()), daemon=True).start()
    try:
        def body(index):
            shard = (0, 1, 3)[index]  # shard 2 is the process's
            if shard == 3:
                waiting.wait(30)
            logger = newcomer_logger if shard == 3 else survivors
            with ferry.Communicator(address, **PEER_ARGS) as comm, \
                    toy(comm, layers, min_peers=3 if shard < 3 else 1, logger=logger, **options) as diloco:

                def pause():
                    if diloco.position == pause_at and shard < 3:
                        waiting.set()
                        # blocking: the process is inside the all-reduce, and dies there;
                        # overlapped: it is dead, the newcomer connects before this wait fails
                        time.sleep(1.5 if overlap else 0.6)

                while diloco.outer_step < outer_steps:
                    pause()
                    inner_step(diloco, shard, diverge_from=diverge)
                pause()  # overlapped-last: before the drain
                diloco.finish()
                return [t.clone() for t in diloco.outer_params + diloco.outer_momentum_buffers], comm.world_size

        results = run_threads(3 if newcomer else 2, body, timeout_s=60)
        assert child.wait(10) == -9  # SIGKILL, as planned
    finally:
        reap(child)
    assert sum(f"reduce of step {label} failed" in line for line in logs) == 2, logs  # both survivors retried
    if newcomer:
        phase = "final reduce" if overlap and label == outer_steps * fragments else "reduce"
        assert any(f"joined at step {label} ({phase})" in line for line in newcomer_logs), newcomer_logs
    for tensors, world in results:
        assert world == (3 if newcomer else 2)
        assert bits(tensors) == bits(results[0][0])
    if not replayed:
        return
    first_with_newcomer = die_at + (2 if overlap else 1)
    windows = [[0, 1, 2] if w < die_at else [0, 1, 3] if newcomer and w >= first_with_newcomer else [0, 1]
               for w in range(outer_steps)]
    expected = replay(windows, diverge_from=diverge)
    with_the_dead = replay(windows[:die_at] + [[0, 1, 2]] + windows[die_at + 1:], diverge_from=diverge)
    assert not torch.equal(expected["theta"], with_the_dead["theta"])  # the test can tell them apart
    theta, momentum = results[0][0]
    assert torch.equal(theta, expected["theta"]) and torch.equal(momentum, expected["momentum"])


def test_options_are_checked(address):
    """Bad options fail at construction; fragments given as lists are used as given."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    inner = torch.optim.SGD(model.parameters(), lr=0.1)

    def make(**options):
        return DiLoCo(ferry.Communicator(address, **PEER_ARGS), model, inner, **{"sync_every": 6, **options})

    layers = [list(m.parameters()) for m in model]
    for bad in (dict(fragments=4), dict(fragments=0), dict(fragments=4, sync_every=8), dict(sync_every=5, fragments=2),
                dict(merge="mix"), dict(overlap=True, merge="other"), dict(overlap=True, alpha=1.5),
                dict(fragments=[layers[0], layers[1]]), dict(fragments=[layers[0] + layers[1], layers[1] + layers[2]])):
        with pytest.raises(ferry.InvalidArgumentError):
            make(**bad)
    assert [len(f.params) for f in make(fragments=2).fragments] == [4, 2]  # whole layers, the first longer
    given = make(fragments=[layers[2], layers[0] + layers[1]], overlap=True)
    assert [[id(p) for p in f.params] for f in given.fragments] == [[id(p) for p in layers[2]],
                                                                  [id(p) for p in layers[0] + layers[1]]]
    assert given.period == 3
