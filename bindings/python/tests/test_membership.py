"""connect, update_topology, peers_pending, wait_for_world and the attributes."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import ferry
from harness import join, make_peer, run_threads


def test_attributes_of_two_groups(address):
    everyone_read = threading.Barrier(5, timeout=20)

    def body(i):
        group, size = (7, 3) if i < 3 else (9, 2)
        with join(address, size, peer_group=group) as comm:
            data = np.full(4, 1.0 if group == 7 else 100.0)
            comm.all_reduce(data, op="sum")
            # Each group settled at some point; re-vote until both groups are seen complete.
            deadline = time.monotonic() + 15
            while comm.global_world_size < 5 and time.monotonic() < deadline:
                comm.update_topology()
                time.sleep(0.005)
            attrs = (comm.world_size, comm.global_world_size, comm.num_groups, comm.largest_group_size,
                     comm.peer_group, comm.rank, float(data[0]))
            assert f"rank={comm.rank}/" in repr(comm)
            everyone_read.wait()
            return attrs

    results = run_threads(5, body)
    assert [r[:5] for r in results] == [(3, 5, 2, 3, 7)] * 3 + [(2, 5, 2, 3, 9)] * 2
    assert sorted(r[5] for r in results[:3]) == [0, 1, 2]
    assert sorted(r[5] for r in results[3:]) == [0, 1]
    assert [r[6] for r in results] == [3.0] * 3 + [200.0] * 2


def test_a_newcomer_waits_pending_until_the_group_admits_it(address):
    first_round = threading.Event()

    def body(i):
        if i < 2:
            with join(address, 2) as comm:
                comm.all_reduce(np.ones(4), op="sum")
                first_round.set()
                deadline = time.monotonic() + 15
                while comm.peers_pending() == 0:  # every caller gets the same count
                    assert time.monotonic() < deadline, "newcomer never pending"
                    time.sleep(0.01)
                comm.update_topology()
                data = np.ones(4)
                comm.all_reduce(data, op="sum")
                return comm.world_size, float(data[0])
        assert first_round.wait(15)
        with make_peer(address) as comm:
            comm.connect()  # returns once the others admit it
            data = np.ones(4)
            comm.all_reduce(data, op="sum")
            return comm.world_size, float(data[0])

    assert run_threads(3, body) == [(3, 3.0)] * 3


def test_a_peer_that_closes_is_lost_to_the_others_who_continue_smaller(address):
    left = threading.Event()

    def body(i):
        comm = join(address, 3)
        comm.all_reduce(np.ones(4))
        if i == 2:
            comm.close()
            left.set()
            return None
        assert left.wait(15)
        with comm:
            data = np.ones(16)
            with pytest.raises(ferry.PeerLostError) as info:
                comm.all_reduce(data, op="sum")
            assert info.value.is_retryable
            comm.update_topology()
            data[:] = 1.0  # in place, a failed all-reduce leaves unspecified values
            comm.all_reduce(data, op="sum")
            return comm.world_size, float(data[0])

    assert run_threads(3, body)[:2] == [(2, 2.0)] * 2


def test_wait_for_world_gives_up_at_its_deadline(address):
    with join(address, 1) as comm:
        start = time.monotonic()
        with pytest.raises(ferry.TimeoutError, match="1 of 2 peers"):
            comm.wait_for_world(2, timeout=0.3)
        assert time.monotonic() - start < 5


def test_connect_times_out_when_nobody_admits_and_can_be_retried(address):
    def body(i):
        if i == 0:
            with join(address, 1) as comm:
                time.sleep(1.5)  # never votes until the newcomer timed out once
                comm.wait_for_world(2, timeout=15)
                return comm.world_size
        time.sleep(0.1)
        with make_peer(address, timeout=0.5) as comm:
            with pytest.raises(ferry.TimeoutError):
                comm.connect()
            # Still pending: connect() again waits again, and this time peer 0 votes.
            deadline = time.monotonic() + 15
            while True:
                try:
                    comm.connect()
                    break
                except ferry.TimeoutError:
                    assert time.monotonic() < deadline
            return comm.world_size

    assert run_threads(2, body) == [2, 2]


def test_every_peer_sees_the_same_ring_of_ids_itself_at_its_rank_and_one_epoch_per_vote(address):
    everyone_read = threading.Barrier(3, timeout=20)

    def body(_):
        with join(address, 3) as comm:
            before = (comm.ring(), comm.peer_id, comm.rank, comm.epoch)
            everyone_read.wait()  # nobody votes before all have read the first topology
            comm.update_topology()  # a vote with nobody to admit or drop: the same ring, a new epoch
            return before, (comm.ring(), comm.epoch)

    results = run_threads(3, body)
    rings = [ring for (ring, _, _, _), _ in results]
    assert rings == [rings[0]] * 3 and sorted(rings[0]) == sorted({peer_id for (_, peer_id, _, _), _ in results})
    assert all(ring[rank] == peer_id for (ring, peer_id, rank, _), _ in results)
    epochs = {epoch for (_, _, _, epoch), _ in results}
    after = {(tuple(ring), epoch) for _, (ring, epoch) in results}
    assert len(epochs) == 1 and len(after) == 1
    ring_after, epoch_after = after.pop()
    assert list(ring_after) == rings[0] and epoch_after != epochs.pop()
