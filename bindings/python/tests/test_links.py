"""comm.links(): the master's link matrix, the same for every member, printable."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import ferry
from harness import join, make_peer, run_threads


def test_every_member_reads_the_same_matrix_of_every_pair(address):
    """Every ordered pair: the ring's links as the all-reduce measured them, the others as
    the probes at admission did (8 connections of their own)."""
    everyone_read = threading.Barrier(3, timeout=20)

    def body(i):
        with join(address, 3, shared_memory=False) as comm:
            comm.all_reduce(np.ones(1 << 20, dtype=np.float32), op="sum")  # 4 MiB: enough for a rate
            ring = comm.ring()
            ring_pairs = {(ring[r], ring[(r + 1) % 3]) for r in range(3)}
            deadline = time.monotonic() + 10
            links = comm.links()
            # The other members' reports may still be on their way: until then their links show the probe's figures.
            while len(links) < 6 or sum(l.connections == 2 for l in links) < 3:
                assert time.monotonic() < deadline, f"only {len(links)} links reported: {links}"
                time.sleep(0.02)
                links = comm.links()
            everyone_read.wait()
            return ring_pairs, links

    results = run_threads(3, body)
    ring_pairs = results[0][0]
    members = sorted({peer for pair in ring_pairs for peer in pair})
    assert len(members) == 3
    pairs = sorted((a, b) for a in members for b in members if a != b)
    for _, links in results:
        assert sorted((l.from_peer, l.to_peer) for l in links) == pairs
        # The same measurements everywhere; only their ages moved on between the queries.
        assert [(l.from_peer, l.to_peer, l.bytes, l.goodput_bytes_per_s, l.rtt_ms) for l in links] == \
            [(l.from_peer, l.to_peer, l.bytes, l.goodput_bytes_per_s, l.rtt_ms) for l in results[0][1]]
        for link in links:
            assert isinstance(link, ferry.Link)
            assert not link.shared_memory
            assert link.goodput_bytes_per_s > 0 and link.bytes > 0
            assert link.rtt_ms > 0 and 0 <= link.retransmit_ratio <= 1 and link.age_s >= 0
            # The harness pins connections=2 (a pinned count never moves); a probe uses its own 8.
            assert link.connections == (2 if (link.from_peer, link.to_peer) in ring_pairs else 8)
    table = str(results[0][1])
    assert "goodput MB/s" in table and "conns" in table and len(table.splitlines()) == 7


def test_links_before_connect_is_invalid_usage(address):
    with make_peer(address) as comm:
        try:
            comm.links()
        except ferry.InvalidUsageError:
            pass
        else:
            raise AssertionError("links() before connect() must raise InvalidUsageError")
    assert str(ferry.LinkMatrix()) == "no link measured yet"


def test_optimize_topology_remeasures_and_every_member_sees_the_same_ring(address):
    def body(i):
        with join(address, 3, shared_memory=False) as comm:
            comm.optimize_topology()
            links = comm.links()
            out = comm.all_reduce(np.arange(1000, dtype=np.float32) * (i + 1), op="sum")
            return comm.ring(), len(links), {l.connections for l in links}, out.tobytes()

    results = run_threads(3, body)
    for ring, count, connections, out in results:
        assert ring == results[0][0]
        assert count == 6 and connections == {8}  # probed afresh, before any collective
        assert out == results[0][3]


def test_dial_out_only_peers_keep_their_place(address):
    """Two of four peers accept no connection (dial_out_only=True): the ring still holds all
    four, the two never neighbours, and every peer ends with the same sum."""

    def body(i):
        with join(address, 4, dial_out_only=i % 2 == 1, shared_memory=False) as comm:
            out = comm.all_reduce(np.full(1000, i + 1, dtype=np.float32), op="sum")
            return comm.ring(), out, comm.peer_id

    results = run_threads(4, body)
    closed = {results[1][2], results[3][2]}
    for ring, out, _ in results:
        assert ring == results[0][0] and len(ring) == 4
        assert not any(ring[r] in closed and ring[(r + 1) % 4] in closed for r in range(4))
        assert np.all(out == 10.0)


def test_dial_out_only_takes_a_bool_only(address):
    with pytest.raises(ferry.InvalidArgumentError, match="dial_out_only"):
        make_peer(address, dial_out_only=1)
