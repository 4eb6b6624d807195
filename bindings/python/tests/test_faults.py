"""Peers in real processes: an all-reduce across processes, and peers killed with SIGKILL
before and during collectives (survivors get PeerLostError, re-form, and carry on)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import ferry
from harness import PeerProcess, join, run_threads


@pytest.fixture
def processes():
    started = []

    def start(address, world, mode="sleep"):
        p = PeerProcess(address, world, mode)
        started.append(p)
        return p

    yield start
    for p in started:
        p.close()


def test_an_all_reduce_across_processes(address, processes):
    children = [processes(address, 3, "allreduce") for _ in range(2)]

    def body(_):
        with join(address, 3) as comm:
            data = np.ones(1024, np.float32)
            comm.all_reduce(data, op="sum")
            return float(data[0])

    assert run_threads(1, body) == [3.0]
    for child in children:
        child.wait_ready()
        assert child.finish().split() == ["result", "3.0"]


def survivors(address, on_ready, first_call):
    """Two thread peers joined with one process peer; after on_ready(), first_call must fail
    with PeerLostError; then they re-form and all-reduce in the smaller world."""
    ready = threading.Barrier(2, action=on_ready, timeout=20)

    def body(_):
        with join(address, 3) as comm:
            ready.wait()
            data = np.ones(4096, np.float32)
            with pytest.raises(ferry.PeerLostError) as info:
                first_call(comm, data)
            assert info.value.is_retryable and "peer" in str(info.value).lower()
            comm.update_topology()
            data[:] = 1.0
            comm.all_reduce(data, op="sum")
            return comm.world_size, float(data[0])

    return run_threads(2, body)


def test_a_peer_killed_before_an_all_reduce(address, processes):
    child = processes(address, 3)
    killed = lambda: (child.wait_ready(), child.kill())  # noqa: E731
    results = survivors(address, killed, lambda comm, data: comm.all_reduce(data, op="sum"))
    assert results == [(2, 2.0)] * 2


def test_a_peer_killed_during_an_all_reduce(address, processes):
    child = processes(address, 3)

    def kill_soon():
        child.wait_ready()
        threading.Timer(0.5, child.kill).start()  # the survivors are inside all_reduce by then

    def first_call(comm, data):
        start = time.monotonic()
        try:
            comm.all_reduce(data, op="sum")
        finally:
            assert time.monotonic() - start > 0.3  # it was blocked on the sleeping peer

    assert survivors(address, kill_soon, first_call) == [(2, 2.0)] * 2


def test_an_async_all_reduce_sees_the_kill_in_wait(address, processes):
    child = processes(address, 3)

    def kill_soon():
        child.wait_ready()
        threading.Timer(0.3, child.kill).start()

    def first_call(comm, data):
        handle = comm.all_reduce_async(data, op="sum")
        handle.wait()

    assert survivors(address, kill_soon, first_call) == [(2, 2.0)] * 2


def test_all_reduce_many_retries_in_the_smaller_world(address, processes):
    child = processes(address, 3)
    ready = threading.Barrier(2, action=lambda: (child.wait_ready(), threading.Timer(0.5, child.kill).start()),
                              timeout=20)

    def body(_):
        with join(address, 3) as comm:
            ready.wait()
            tensors = [np.ones(10_000, np.float32) * (k + 1) for k in range(5)]
            results = comm.all_reduce_many(tensors, op="sum", max_in_flight=2)
            # in-place inputs were restored before the retry: sums of one clean world of 2
            return comm.last_info.world_size, [float(r[0]) for r in results]

    assert run_threads(2, body) == [(2, [2.0, 4.0, 6.0, 8.0, 10.0])] * 2


def test_all_reduce_many_gives_up_when_the_world_is_too_small(address, processes):
    child = processes(address, 2)

    def body(_):
        with join(address, 2) as comm:
            child.wait_ready()
            threading.Timer(0.3, child.kill).start()
            with pytest.raises(ferry.PeerLostError):
                comm.all_reduce_many([np.ones(8, np.float32)])
            return True

    assert run_threads(1, body) == [True]


@pytest.mark.deadline(120)
def test_a_holder_killed_mid_transfer_never_leaves_a_torn_tensor(address, processes):
    """Two holder processes serve 96 MiB (zstd level 9, so the fetch takes a while) to a
    newcomer; one holder is SIGKILLed while the newcomer fetches. The newcomer either finishes
    from the other holder or fails with a retryable error; after update_topology a second sync
    gives it the exact bytes. It never reports success with anything but those bytes."""
    from peer_process import HOLDER_ELEMENTS, holder_weights

    holders = [processes(address, 3, "hold") for _ in range(2)]
    kill_after_s = 0.4

    def body(_):
        with join(address, 3) as comm:
            for holder in holders:
                holder.wait_ready()
            state = {"weights": np.zeros(HOLDER_ELEMENTS, np.float32)}
            threading.Timer(kill_after_s, holders[0].kill).start()
            start = time.monotonic()
            outcomes = []
            try:
                info = comm.sync_shared_state(state, revision=0, strategy="receive_only", compression_level=9)
                outcomes.append(("synced", info.changed))
            except (ferry.PeerLostError, ferry.TimeoutError) as error:
                assert error.is_retryable
                outcomes.append(("failed", type(error).__name__))
                comm.update_topology()
                info = comm.sync_shared_state(state, revision=0, strategy="receive_only", compression_level=9)
                outcomes.append(("synced", info.changed))
            return time.monotonic() - start, outcomes, state["weights"]

    [(elapsed, outcomes, got)] = run_threads(1, body)
    assert elapsed > kill_after_s  # the kill came while the newcomer was inside the sync
    assert outcomes[-1] == ("synced", ("weights",))
    assert got.tobytes() == holder_weights().tobytes()
