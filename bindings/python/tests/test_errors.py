"""Every error class reachable without killing anything: hierarchy, messages, argument and usage errors."""

from __future__ import annotations

import builtins
import inspect
import socket
import threading
import time

import numpy as np
import pytest

import ferry
from ferry import _lib
from ferry.params import comm_params
from harness import join, make_peer, run_threads

ALL_CLASSES = [ferry.InvalidArgumentError, ferry.InvalidUsageError, ferry.TimeoutError, ferry.PeerLostError,
               ferry.MasterLostError, ferry.ConnectError, ferry.MismatchError, ferry.KickedError,
               ferry.ProtocolError, ferry.AuthError, ferry.ResourceError, ferry.InternalError]


def test_one_class_per_result_code_with_the_c_retryable_verdict_and_strerror():
    assert [cls.code for cls in ALL_CLASSES] == list(range(1, 13))
    for cls in ALL_CLASSES:
        assert issubclass(cls, ferry.FerryError)
        assert cls.is_retryable == bool(_lib.lib().ferry_result_is_retryable(cls.code)), cls
        assert ferry.strerror(cls.code) and ferry.strerror(cls.code) != ferry.strerror(0)
    assert issubclass(ferry.InvalidArgumentError, ValueError)
    assert issubclass(ferry.TimeoutError, builtins.TimeoutError)
    assert ferry.TimeoutError is not builtins.TimeoutError
    assert {c for c in ALL_CLASSES if c.is_retryable} == {ferry.TimeoutError, ferry.PeerLostError}


def test_an_unknown_future_code_is_still_a_ferry_error():
    e = ferry.errors.error_for_code(99, "from a newer library")
    assert type(e) is ferry.FerryError and e.code == 99 and str(e) == "from a newer library"


def test_messages_carry_ferry_last_error():
    with pytest.raises(ferry.InvalidArgumentError) as info:
        ferry.Communicator("no-port-here", listen_host="127.0.0.1")
    message = str(info.value)
    assert message.startswith("ferry.Communicator(): invalid argument: master_address")  # the Python call, not the C one
    assert info.value.code == 1 and not info.value.is_retryable


@pytest.mark.parametrize("kwargs", [
    dict(connections=65), dict(io_threads=0), dict(max_chunk_bytes=100),
    dict(heartbeat_timeout=0.001), dict(port_range=(2000, 1000)), dict(timeout=0),
])
def test_the_library_refuses_out_of_range_parameters(kwargs, address):
    with pytest.raises(ferry.InvalidArgumentError):
        make_peer(address, **kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(timeout=-1), dict(timeout=2**32 + 5), dict(timeout=float("nan")), dict(timeout="5"), dict(peer_group=1.5), dict(advertised_port=70000),
    dict(port_range=5), dict(port_range=(1, -1)), dict(master=None), dict(connections=True),
    dict(shared_memory=1), dict(shared_memory="yes"),
])
def test_python_refuses_values_ctypes_would_wrap(kwargs, address):
    kwargs.setdefault("master", address)
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.Communicator(**{"listen_host": "127.0.0.1", **kwargs})


def test_every_argument_after_master_is_keyword_only_and_none_by_default(address):
    parameters = list(inspect.signature(ferry.Communicator).parameters.values())
    assert parameters[0].name == "master"
    assert all(p.kind is p.KEYWORD_ONLY and p.default is None for p in parameters[1:]), parameters
    with pytest.raises(TypeError):
        ferry.Communicator(address, 0)  # a positional peer_group


def test_none_leaves_the_library_default_for_every_parameter(address, monkeypatch):
    names = [p for p in inspect.signature(ferry.Communicator).parameters if p != "master"]
    with ferry.Communicator(address, **dict.fromkeys(names)):
        pass  # None is accepted everywhere
    # Whatever ferry_comm_params_init says is what reaches ferry_comm_create: nothing is hard-coded.
    real = _lib.defaults

    def library_defaults(cls, init):
        params = real(cls, init)
        if cls is _lib.CommParams:
            params.p2p_connections, params.p2p_listen_host, params.peer_group = 7, b"127.0.0.9", 3
            params.shared_memory = 0
        return params

    monkeypatch.setattr(_lib, "defaults", library_defaults)
    params, _ = comm_params(address)
    expected = library_defaults(_lib.CommParams, "ferry_comm_params_init")
    for field, _type in _lib.CommParams._fields_:
        if field != "master_address":
            assert getattr(params, field) == getattr(expected, field), field


def test_an_unusable_congestion_control_is_refused(address):
    with pytest.raises(ferry.FerryError):
        make_peer(address, congestion_control="no-such-algorithm")


def test_calls_before_connect_are_invalid_usage(address):
    with make_peer(address) as comm:
        for call in (lambda: comm.world_size, lambda: comm.rank, lambda: comm.peer_id, lambda: comm.epoch,
                     comm.ring, comm.update_topology, comm.peers_pending,
                     lambda: comm.all_reduce(np.ones(4, np.float32)),
                     lambda: comm.all_reduce_async(np.ones(4, np.float32)),
                     lambda: comm.all_reduce_many([np.ones(4, np.float32)])):
            with pytest.raises(ferry.InvalidUsageError):
                call()


def test_connect_twice_is_invalid_usage(address):
    with make_peer(address) as comm:
        comm.connect()
        with pytest.raises(ferry.InvalidUsageError, match="connect"):
            comm.connect()


def test_calls_after_close_are_invalid_usage_and_close_is_idempotent(address):
    comm = join(address, 1)
    comm.close()
    comm.close()
    assert comm.closed
    for call in (comm.connect, comm.update_topology, lambda: comm.world_size,
                 lambda: comm.all_reduce(np.ones(4, np.float32))):
        with pytest.raises(ferry.InvalidUsageError, match="closed"):
            call()
    assert "closed" in repr(comm)


def test_an_unreachable_master_is_a_connect_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with make_peer(f"127.0.0.1:{port}", master_connect_timeout=0.3) as comm:
        with pytest.raises(ferry.ConnectError, match="no master answered within 300 ms"):
            comm.connect()


def test_a_peer_started_before_its_master_connects_once_it_is_up():
    with socket.socket() as s:  # a port nobody listens on yet
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with make_peer(f"127.0.0.1:{port}") as comm:
        started = time.monotonic()
        dialing = threading.Thread(target=comm.connect)
        dialing.start()
        time.sleep(1.0)
        assert dialing.is_alive()
        with ferry.Master(f"127.0.0.1:{port}"):
            dialing.join(timeout=30)
            assert not dialing.is_alive()
            assert time.monotonic() - started >= 1.0
            assert comm.world_size == 1


def test_a_busy_p2p_port_range_is_a_connect_error(address):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ferry.ConnectError):
            make_peer(address, port_range=(port, port))


def test_a_mismatched_collective_fails_on_every_peer_which_then_carry_on(address):
    def body(i):
        with join(address, 2) as comm:
            data = np.ones(8, np.float32)
            with pytest.raises(ferry.MismatchError) as info:
                comm.all_reduce(data, op="sum", tag=100 + i)  # different tags
            assert not info.value.is_retryable
            comm.all_reduce(data, op="sum", tag=7)
            return data.tolist()

    assert run_threads(2, body) == [[2.0] * 8] * 2


def test_update_topology_with_ops_in_flight_is_invalid_usage(address):
    tried = threading.Event()

    def body(i):
        with join(address, 2) as comm:
            data = np.ones(1 << 16, np.float32)
            if i == 0:
                handle = comm.all_reduce_async(data, op="sum")  # cannot finish before peer 1 issues
                try:
                    with pytest.raises(ferry.InvalidUsageError, match="in flight"):
                        comm.update_topology()
                finally:
                    tried.set()
                handle.wait()
            else:
                assert tried.wait(15)
                comm.all_reduce(data, op="sum")
            return float(data[0])

    assert run_threads(2, body) == [2.0, 2.0]


@pytest.fixture
def secrets(tmp_path):
    paths = {}
    for name, text in (("a", "a" * 24 + "\n"), ("b", "b" * 32), ("short", "tiny")):
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    return paths


def test_a_run_secret_admits_only_peers_that_prove_it(secrets):
    with ferry.Master("127.0.0.1:0", secret_file=str(secrets["a"])) as m:
        address = f"127.0.0.1:{m.port}"
        for wrong in (secrets["b"], None):
            with make_peer(address, secret_file=None if wrong is None else str(wrong)) as comm:
                with pytest.raises(ferry.AuthError) as info:
                    comm.connect()
                assert not info.value.is_retryable
        with make_peer(address, secret_file=secrets["a"]) as comm:  # a Path works too
            comm.connect()
            assert comm.all_reduce(np.ones(2), op="sum").tolist() == [1.0, 1.0]
    with ferry.Master("127.0.0.1:0") as m:  # a peer with a secret refuses an unchecking master
        with make_peer(f"127.0.0.1:{m.port}", secret_file=str(secrets["a"])) as comm:
            with pytest.raises(ferry.AuthError):
                comm.connect()


def test_unusable_secret_files_are_invalid_arguments(secrets, address):
    with pytest.raises(ferry.InvalidArgumentError, match="16 bytes"):
        ferry.Master("127.0.0.1:0", secret_file=str(secrets["short"]))
    with pytest.raises(ferry.InvalidArgumentError, match="secret"):
        make_peer(address, secret_file=str(secrets["a"]) + ".missing")
