"""What a newcomer meets first: launching from the environment, torch's spellings,
errors a torch handler catches and that name Python calls, and the verdict for a
peer the master removed while it was stopped."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

import ferry
from harness import PEER_DEFAULTS, PeerProcess, join, run_threads


def test_the_master_address_comes_from_the_environment(address, monkeypatch):
    monkeypatch.setenv("FERRY_MASTER_ADDR", address)
    with ferry.Communicator(**PEER_DEFAULTS) as comm:
        assert comm.master == address
        comm.connect()
        data = np.ones(4, np.float32)
        comm.all_reduce(data)
        assert comm.world_size == 1 and data.tolist() == [1.0] * 4


def test_no_address_anywhere_names_the_variable(monkeypatch):
    monkeypatch.delenv("FERRY_MASTER_ADDR", raising=False)
    with pytest.raises(ferry.InvalidArgumentError, match=r"\$FERRY_MASTER_ADDR is not set"):
        ferry.Communicator(**PEER_DEFAULTS)


def test_a_malformed_address_in_the_environment_is_named_as_such(monkeypatch):
    monkeypatch.setenv("FERRY_MASTER_ADDR", "no-port-here")
    with pytest.raises(ferry.InvalidArgumentError, match=r"\$FERRY_MASTER_ADDR: "):
        ferry.Communicator(**PEER_DEFAULTS)


def test_torch_reduce_ops_are_accepted_and_unsupported_ones_name_ferrys(address):
    dist = pytest.importorskip("torch.distributed")

    def body(i):
        with join(address, 2) as comm:
            data = np.array([i, 10 - i], np.float32)
            comm.all_reduce(data, op=dist.ReduceOp.MAX)
            total = np.ones(2, np.float32)
            comm.all_reduce(total, op=dist.ReduceOp.SUM)
            return data.tolist(), total.tolist()

    assert run_threads(2, body) == [([1.0, 10.0], [2.0, 2.0])] * 2
    with pytest.raises(ferry.InvalidArgumentError, match="sum, avg, prod, min or max"):
        ferry.dtypes.parse_op(dist.ReduceOp.BAND)
    assert ferry.dtypes.parse_op(dist.ReduceOp.PRODUCT) == ferry.ReduceOp.PROD


def test_ferry_errors_are_runtime_errors():
    assert issubclass(ferry.FerryError, RuntimeError)
    with pytest.raises(RuntimeError):
        raise ferry.PeerLostError("lost")
    assert issubclass(ferry.TimeoutError, TimeoutError) and issubclass(ferry.InvalidArgumentError, ValueError)


def test_messages_name_the_python_call_not_the_c_function(address):
    with ferry.Communicator(address, **PEER_DEFAULTS) as comm:
        with pytest.raises(ferry.InvalidUsageError) as info:
            comm.all_reduce(np.ones(4, np.float32))
    assert "comm.connect()" in str(info.value) and "ferry_connect" not in str(info.value)


@pytest.mark.deadline(90)
def test_a_peer_evicted_while_stopped_hears_it_was_kicked(address):
    silenced = PeerProcess(address, 2, mode="silenced")
    try:
        with join(address, 2) as comm:
            assert silenced.wait_ready() in (0, 1)
            time.sleep(3 * PEER_DEFAULTS["heartbeat_timeout"])  # evicted for silence by now
            comm.update_topology()
            assert comm.world_size == 1
            silenced.proc.send_signal(signal.SIGCONT)
            out = silenced.finish(timeout_s=30)
    finally:
        silenced.close()
    assert out.startswith("raised KickedError"), out
    assert "heard nothing from this peer" in out, out


def test_peers_started_with_different_world_sizes_both_get_a_mismatch_at_once(address):
    def body(i):
        with join(address, 2, timeout=60) as comm:
            started = time.monotonic()
            with pytest.raises(ferry.MismatchError) as info:
                if i == 0:
                    comm.all_reduce(np.ones(4, np.float32))
                else:
                    comm.wait_for_world(3)
            return time.monotonic() - started, str(info.value)

    for took, message in run_threads(2, body):
        assert took < 5, message
        assert "calls out of order" in message and "called comm.wait_for_world()" in message, message
        assert "called all_reduce(count 4, f32, sum" in message, message


def test_a_dtype_and_op_mismatch_is_told_in_names(address):
    def body(i):
        with join(address, 2) as comm:
            data = np.ones(4, np.float32 if i == 0 else np.float64)
            with pytest.raises(ferry.MismatchError) as info:
                comm.all_reduce(data, op="sum" if i == 0 else "avg")
            return str(info.value)

    for message in run_threads(2, body):
        assert ("dtype f32 vs f64, op sum vs avg" in message or "dtype f64 vs f32, op avg vs sum" in message), message
        assert "rank 0 (peer " in message and "rank 1 (peer " in message, message


def test_a_master_open_to_the_network_without_a_secret_warns_as_ferry_master_does(capfd):
    for listen, warns in (("127.0.0.1:0", False), ("0.0.0.0:0", True)):
        master = ferry.Master(listen)
        try:
            master.start()
        finally:
            master.close()
        err = capfd.readouterr().err
        assert ("without a run secret" in err) == warns, err
        if warns:
            assert "ferry.Master(secret_file=...)" in err, err


def test_broadcast_gives_every_peer_the_roots_bytes_and_barrier_waits_for_all(address):
    torch = pytest.importorskip("torch")
    entered = threading.Event()

    def body(i):
        with join(address, 2) as comm:
            root = 1
            data = np.array([-0.0, np.nan, 1.5, -np.inf], np.float32) if comm.rank == root else np.full(4, 7, np.float32)
            assert comm.broadcast(data, root=root) is data
            weights = torch.arange(6, dtype=torch.float64) * (comm.rank + 1)
            comm.broadcast(weights)  # root 0
            if i == 1:
                time.sleep(0.2)
                entered.set()
            comm.barrier()
            return data.tobytes(), weights.tolist(), entered.is_set()

    results = run_threads(2, body)
    expected = np.array([-0.0, np.nan, 1.5, -np.inf], np.float32).tobytes()
    for data, weights, saw_entered in results:
        assert data == expected  # -0.0 and the NaN survive: bytes, not float sums
        assert weights == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert saw_entered


def test_broadcast_from_a_root_outside_the_group_is_an_argument_error(address):
    with join(address, 1) as comm:
        with pytest.raises(ferry.InvalidArgumentError, match="root 3 is not a rank"):
            comm.broadcast(np.zeros(4, np.float32), root=3)
