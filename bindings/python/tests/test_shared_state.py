"""sync_shared_state: popular content wins, newcomers receive, send-only, inequality allowed."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import ferry
from harness import join, run_threads


def test_the_popular_content_wins_in_place(address):
    def body(_):
        with join(address, 3) as comm:
            odd = comm.rank == 2
            weights = torch.full((50_000,), 9.0 if odd else 1.0, dtype=torch.bfloat16)
            bias = np.arange(100, dtype=np.float64) * (2 if odd else 1)
            ptr = weights.data_ptr()
            info = comm.sync_shared_state({"weights": weights, "bias": bias}, revision=1)
            assert weights.data_ptr() == ptr  # overwritten where it lies
            return odd, info.revision, info.changed, weights[-1].item(), float(bias[-1])

    for odd, revision, changed, w, b in run_threads(3, body):
        assert (revision, w, b) == (1, 1.0, 99.0)
        assert changed == (("weights", "bias") if odd else ())


def test_a_receive_only_newcomer_gets_the_weights(address):
    first_sync = threading.Event()

    def body(i):
        if i < 2:
            with join(address, 2) as comm:
                weights = np.full(10_000, 5.0, np.float32)
                assert comm.sync_shared_state({"w": weights}, revision=1).revision == 1
                first_sync.set()
                comm.wait_for_world(3, timeout=15)
                info = comm.sync_shared_state({"w": weights}, revision=2, compression_level=1)
                return info.revision, info.changed, float(weights[0])
        assert first_sync.wait(15)
        with join(address, 3) as comm:
            weights = np.zeros(10_000, np.float32)
            info = comm.sync_shared_state({"w": weights}, revision=0, strategy="receive_only",
                                          compression_level=1)
            assert info.bytes_received > 0
            return info.revision, info.changed, float(weights[0])

    assert run_threads(3, body) == [(2, (), 5.0)] * 2 + [(2, ("w",), 5.0)]


def test_send_only_wins_and_allowed_inequality_is_left_alone(address):
    def body(_):
        with join(address, 2) as comm:
            leader = comm.rank == 0
            weights = np.full(64, 7.0 if leader else 0.0)
            if leader:
                weights.flags.writeable = False  # send-only never writes
            rng = torch.full((4,), float(comm.rank))
            info = comm.sync_shared_state({"w": weights, "rng": rng}, revision=1,
                                          strategy=ferry.SyncStrategy.SEND_ONLY if leader else "enforce_popular",
                                          allow_inequality={"rng"})
            return comm.rank, info.changed, float(weights[0]), rng[0].item()

    # Threads and ranks need not line up: which thread becomes rank 0 is the master's call.
    assert sorted(run_threads(2, body)) == [(0, (), 7.0, 0.0), (1, ("w",), 7.0, 1.0)]


def test_peers_declaring_different_tensors_mismatch(address):
    def body(i):
        with join(address, 2) as comm:
            t = np.zeros(8, np.float32 if i == 0 else np.float64)
            with pytest.raises(ferry.MismatchError):
                comm.sync_shared_state({"w": t}, revision=1)
            return True

    assert run_threads(2, body) == [True, True]


def test_shared_state_argument_errors(address):
    with join(address, 1) as comm:
        t = np.zeros(4, np.float32)
        for kwargs, match in [(dict(strategy="sometimes"), "sync strategy"), (dict(strategy=7), "sync strategy"),
                              (dict(allow_inequality=["nope"]), "unknown tensors"),
                              (dict(revision=-1), "revision"), (dict(compression_level=-2), "compression")]:
            with pytest.raises(ferry.InvalidArgumentError, match=match):
                comm.sync_shared_state({"w": t}, **{"revision": 1, **kwargs})
        frozen = np.zeros(4)
        frozen.flags.writeable = False
        with pytest.raises(ferry.InvalidArgumentError, match="read-only"):
            comm.sync_shared_state({"w": frozen}, revision=1)
        with pytest.raises(ferry.InvalidArgumentError):
            comm.sync_shared_state([t], revision=1)
        with pytest.raises(ferry.InvalidArgumentError):
            comm.sync_shared_state({"": t}, revision=1)  # the library checks names
        assert comm.sync_shared_state({"w": t}, revision=3).revision == 3
    with ferry.Communicator(address, listen_host="127.0.0.1") as unconnected:
        with pytest.raises(ferry.InvalidUsageError):
            unconnected.sync_shared_state({"w": t}, revision=1)
