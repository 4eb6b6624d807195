"""ferry.Master: start, stop, port, context manager, and its errors."""

from __future__ import annotations

import time

import numpy as np
import pytest

import ferry
from harness import make_peer


def test_lifecycle_and_ephemeral_port():
    m = ferry.Master("127.0.0.1:0", start=False)
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
    with ferry.Master("127.0.0.1:0", peer_timeout=5) as m:
        assert m.running
        with make_peer(f"127.0.0.1:{m.port}") as comm:
            comm.connect()
            data = np.arange(3, dtype=np.float64)
            assert comm.all_reduce(data, op="sum") is data
            assert comm.world_size == 1
    assert not m.running


def test_a_master_serves_from_construction():
    """Issue 42 item 6: a constructed Master answers peers at once (it used to bind only, and a
    peer waited 10 s to be told no ferry master answered)."""
    m = ferry.Master("127.0.0.1:0")
    try:
        assert m.running
        began = time.monotonic()
        with make_peer(f"127.0.0.1:{m.port}", timeout=5) as comm:
            comm.connect()
            assert comm.world_size == 1
        assert time.monotonic() - began < 4
        assert m.start() is m and m.running  # a no-op while serving: the old start() calls still work
    finally:
        m.close()


def test_a_master_serves_once_and_says_so_in_python_terms():
    with ferry.Master("127.0.0.1:0") as m:
        m.stop()
        assert not m.running
        with pytest.raises(ferry.InvalidUsageError) as info:
            m.start()
    message = str(info.value)
    assert "Master.start()" in message and "Master.stop()" in message and "ferry.Master(" in message, message
    assert "ferry_master" not in message, message


def test_bad_addresses_and_port_conflicts():
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Master("not an address")
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Master(48148)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Master("127.0.0.1:0", peer_timeout=-5)
    with ferry.Master("127.0.0.1:0") as m:
        with pytest.raises(ferry.ConnectError):
            ferry.Master(f"127.0.0.1:{m.port}")


def test_peers_see_master_lost_after_stop(master, address):
    comm = make_peer(address, master_reconnect_timeout=0)
    comm.connect()
    master.stop()
    with pytest.raises(ferry.MasterLostError) as info:
        # The first call may race the socket's closing: the error must come within the heartbeat deadline.
        for _ in range(100):
            comm.all_reduce(np.ones(4, np.float32))
    assert not info.value.is_retryable
    comm.close()


def test_a_master_stopped_for_good_fails_its_peers_at_once(master, address):
    """Master.stop() tells the peers: MasterLostError at once, not after the reconnect window
    (before the going_away message, update_topology waited here for the whole window, 300 s)."""
    comm = make_peer(address, master_reconnect_timeout=300)
    comm.connect()
    master.stop()
    began = time.monotonic()
    with pytest.raises(ferry.MasterLostError) as info:
        comm.update_topology()
    assert time.monotonic() - began < 60  # a hang-deadline, not a timing
    message = str(info.value)
    assert "shut down" in message and "will not come back" in message and "Master.stop()" in message, message
    assert not info.value.is_retryable
    with pytest.raises(ferry.MasterLostError):
        comm.all_reduce(np.ones(4, np.float32))
    comm.close()


def test_a_master_started_again_takes_its_peer_back(master, address):
    """A lost master (a crash, or Master.stop(restart=True)) is retryable: PeerLostError, then
    update_topology waits for the master started again on the same port, and the peer goes on
    with its id."""
    comm = make_peer(address)
    comm.connect()
    peer_id = comm.peer_id
    assert comm.all_reduce(np.full(4, 2.0, np.float32)).tolist() == [2.0] * 4
    master.stop(restart=True)
    with pytest.raises(ferry.PeerLostError) as info:
        for _ in range(100):  # the first call may race the socket's closing
            comm.all_reduce(np.ones(4, np.float32))
    assert info.value.is_retryable
    # While the master is away an async collective is still issued: it fails where the caller waits.
    handle = comm.all_reduce_async(np.ones(4, np.float32))
    with pytest.raises(ferry.PeerLostError):
        handle.wait()
    with ferry.Master(address):
        comm.update_topology()
        assert comm.peer_id == peer_id
        assert comm.all_reduce(np.full(4, 3.0, np.float32)).tolist() == [3.0] * 4
        comm.close()


def test_an_embedded_master_says_what_ferry_master_says_at_default_settings(capfd):
    """Its listen, join and leave lines at info (the library's own log stays at warn)."""
    with ferry.Master("127.0.0.1:0") as m:
        port = m.port
        comm = make_peer(f"127.0.0.1:{port}")
        comm.connect()
        comm.close()
        deadline = time.monotonic() + 10
        err = ""
        while time.monotonic() < deadline and "leave: " not in err:
            err += capfd.readouterr().err
            time.sleep(0.05)
    err += capfd.readouterr().err
    assert f"[ferry info] master listening on 127.0.0.1:{port}" in err, err
    assert "[ferry info] join: " in err and "[ferry info] leave: " in err, err
    assert "[ferry info] summary: " in err, err
