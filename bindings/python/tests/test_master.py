"""ferry.Master: start, stop, port, context manager, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import ferry
from harness import make_peer


def test_lifecycle_and_ephemeral_port():
    m = ferry.Master("127.0.0.1:0")
    assert m.port > 0 and not m.running
    assert m.start() is m and m.running
    assert f"port={m.port}" in repr(m)
    m.stop()
    m.stop()  # idempotent
    assert not m.running
    m.close()
    m.close()
    assert "closed" in repr(m)
    with pytest.raises(ferry.InvalidUsageError):
        m.port


def test_context_manager_starts_and_serves_peers():
    with ferry.Master("127.0.0.1:0", peer_timeout_ms=5000) as m:
        assert m.running
        with make_peer(f"127.0.0.1:{m.port}") as comm:
            comm.connect()
            data = np.arange(3, dtype=np.float64)
            assert comm.all_reduce(data, op="sum") is data
            assert comm.world_size == 1
    assert not m.running


def test_a_master_serves_once():
    with ferry.Master("127.0.0.1:0") as m:
        with pytest.raises(ferry.InvalidUsageError):
            m.start()
        m.stop()
        with pytest.raises(ferry.InvalidUsageError):
            m.start()


def test_bad_addresses_and_port_conflicts():
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Master("not an address")
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Master(48148)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Master("127.0.0.1:0", peer_timeout_ms=-5)
    with ferry.Master("127.0.0.1:0") as m:
        with pytest.raises(ferry.ConnectError):
            ferry.Master(f"127.0.0.1:{m.port}")


def test_peers_see_master_lost_after_stop(master, address):
    comm = make_peer(address)
    comm.connect()
    master.stop()
    with pytest.raises(ferry.MasterLostError) as info:
        # The first call may race the socket's closing: the error must come within the heartbeat deadline.
        for _ in range(100):
            comm.all_reduce(np.ones(4, np.float32))
    assert not info.value.is_retryable
    comm.close()
