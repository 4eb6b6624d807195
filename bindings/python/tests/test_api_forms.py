"""The Python API's call forms (issue 39, section 3): keyword-only parameters after a call's
operands, durations in seconds or timedelta, torch's world_size, and 0.3's forms kept for one
minor version as deprecated aliases that still do what they did."""

from __future__ import annotations

import datetime
import inspect
import threading
import time

import numpy as np
import pytest
import torch

import ferry
from diloco_peer import PEER_ARGS, toy
from ferry.elastic import ElasticGroup
from harness import PEER_DEFAULTS, join, make_peer, run_threads

COLLECTIVES = {
    "all_reduce": ("op", "tag", "out", "quant"),
    "all_reduce_async": ("op", "tag", "out", "quant"),
    "all_reduce_many": ("op", "tag", "outs", "max_in_flight", "quant"),
    "sync_shared_state": ("revision", "strategy", "allow_inequality", "compression_level"),
    "all_gather": ("tag",),
    "all_gather_async": ("tag",),
    "broadcast": ("root",),
}


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_collectives_take_their_options_by_keyword_only(name):
    parameters = list(inspect.signature(getattr(ferry.Communicator, name)).parameters.values())
    assert [p.kind for p in parameters[:2]] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * 2
    assert [p.name for p in parameters[2:]] == list(COLLECTIVES[name])
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[2:])


def test_constructors_take_all_but_their_operands_by_keyword_only():
    for cls, operands in ((ferry.Master, ["listen"]), (ferry.Communicator, ["master"]),
                          (ferry.diloco.DiLoCo, ["comm", "model", "inner_optimizer"])):
        parameters = list(inspect.signature(cls).parameters.values())
        assert [p.name for p in parameters if p.kind is not inspect.Parameter.KEYWORD_ONLY] == operands, cls


def test_positional_options_warn_and_still_work(address):
    def body(i):
        with join(address, 2) as comm:
            data = np.full(4, float(i + 1), np.float32)
            comm.all_reduce(data, "avg", 7)
            handle = comm.all_reduce_async(np.ones(2, np.float32), "sum")
            assert handle.wait().world_size == 2
            parts = comm.all_gather(bytes([comm.rank]), 3)
            info = comm.sync_shared_state({"w": np.full(2, float(i))}, 1)
            root = comm.broadcast(np.full(2, float(comm.rank)), 1)
            with pytest.raises(TypeError, match="multiple values for argument 'op'"):
                comm.all_reduce(data, "sum", op="sum")
            with pytest.raises(TypeError, match="positional"):
                comm.all_gather(b"", 1, 2)
            return data.tolist(), handle.output.tolist(), parts, info.revision, root.tolist()

    # Recorded here, not in the threads: catch_warnings is process-wide state.
    with pytest.warns(DeprecationWarning) as record:
        results = run_threads(2, body)
    assert results[0] == results[1]
    data, summed, parts, revision, root = results[0]
    assert data == [1.5] * 4 and summed == [2.0, 2.0] and parts == [b"\0", b"\1"] and revision == 1
    assert root == [1.0, 1.0]
    said = sorted({str(w.message).split(" [")[0] for w in record})
    assert said == ["Communicator.all_gather(): pass tag by keyword",
                    "Communicator.all_reduce(): pass op, tag by keyword",
                    "Communicator.all_reduce_async(): pass op by keyword",
                    "Communicator.broadcast(): pass root by keyword",
                    "Communicator.sync_shared_state(): pass revision by keyword"], said
    assert {w.filename for w in record} == {__file__}  # the caller's line, not ferry's


def test_durations_are_seconds_or_timedelta(address):
    with make_peer(address, timeout=datetime.timedelta(milliseconds=2500)) as comm:
        assert comm.timeout == 2.5
    with make_peer(address, timeout=1.25) as comm:
        assert comm.timeout == 1.25
    with pytest.raises(ferry.InvalidArgumentError, match="timeout must be seconds"):
        make_peer(address, timeout=datetime.timedelta(seconds=-1))
    with make_peer(address) as comm:
        comm.connect()
        began = time.monotonic()
        with pytest.raises(ferry.TimeoutError):
            comm.wait_for_world(2, timeout=datetime.timedelta(milliseconds=300))
        assert time.monotonic() - began < 5
        with pytest.raises(ferry.InvalidArgumentError, match="timeout must be seconds in"):
            comm.wait_for_world(2, timeout=0)


def test_old_millisecond_keywords_warn_and_mean_what_they_meant(address):
    args = {k: v for k, v in PEER_DEFAULTS.items() if k != "timeout"}
    with pytest.deprecated_call(match=r"Communicator\(timeout_ms=\.\.\.\) is now timeout=\.\.\. in seconds"):
        comm = ferry.Communicator(address, timeout_ms=2500, **args)
    with comm:
        assert comm.timeout == 2.5
        with pytest.deprecated_call(match="timeout_ms is now timeout"):
            assert comm.timeout_ms == 2500
    with pytest.raises(TypeError, match="both timeout_ms= .deprecated. and timeout="):
        ferry.Communicator(address, timeout_ms=1000, timeout=1)
    with pytest.deprecated_call(match=r"Master\(\): pass peer_timeout_ms by keyword"):
        master = ferry.Master("127.0.0.1:0", 4000, start=False)
    master.close()
    with pytest.deprecated_call(match=r"Master\(peer_timeout_ms=\.\.\.\) is now peer_timeout"):
        ferry.Master("127.0.0.1:0", peer_timeout_ms=4000, start=False).close()
    ferry.Master("127.0.0.1:0", peer_timeout=datetime.timedelta(seconds=4), start=False).close()


def test_world_size_is_the_group_and_the_old_names_warn(address):
    everyone_saw_two = threading.Barrier(2, timeout=20)

    def body(i):
        with make_peer(address, peer_group=i) as comm:  # two groups of one
            comm.connect()
            deadline = time.monotonic() + 15
            while comm.global_world_size < 2 and time.monotonic() < deadline:
                comm.update_topology()
                time.sleep(0.01)
            everyone_saw_two.wait()  # no peer leaves before the other counted it
            old = comm.group_world_size
            comm.wait_for_peers(1, timeout_s=5)
            return comm.world_size, old, comm.global_world_size

    with pytest.warns(DeprecationWarning) as record:  # here: catch_warnings is process-wide state
        assert run_threads(2, body) == [(1, 1, 2)] * 2
    said = sorted({str(w.message).split(" [")[0] for w in record})
    assert said == ["Communicator.group_world_size is now world_size",
                    "Communicator.wait_for_peers(n, timeout_s=...) is now wait_for_world(n, timeout=...)"], said


def test_diloco_old_forms_warn_and_still_work(address, monkeypatch):
    """Positional options, ``log=`` and the ``outer_momentum`` property of 0.3."""
    monkeypatch.setattr(ferry.elastic, "GROW_FIRST_NOTICE_S", 0.1)
    lines = []
    with ferry.Communicator(address, **PEER_ARGS) as comm:
        model = torch.nn.Linear(2, 1)
        inner = torch.optim.SGD(model.parameters(), lr=0.1)
        with pytest.deprecated_call(match=r"DiLoCo\(\): pass sync_every, outer_lr by keyword"):
            diloco = ferry.diloco.DiLoCo(comm, model, inner, 4, 0.5, min_peers=2, log=lines.append)
        assert diloco.sync_every == 4
        with pytest.raises(ferry.TimeoutError):
            diloco.join(timeout=0.5)
        with pytest.deprecated_call(match="outer_momentum_buffers"):
            buffers = diloco.outer_momentum
        assert [b.data_ptr() for b in buffers] == [b.data_ptr() for b in diloco.outer_momentum_buffers]
    assert any("waiting for min_peers=2" in line for line in lines), lines


def test_log_keyword_warns_once(address):
    """``log=`` of DiLoCo warns (attributed to the caller) and not a second time for the group it builds."""
    with ferry.Communicator(address, **PEER_ARGS) as comm:
        with pytest.warns(DeprecationWarning) as record:
            toy(comm, log=print)
        assert [str(w.message).split(":")[0] for w in record] == ["DiLoCo(log=...)"]
        assert record[0].filename.endswith("diloco_peer.py")  # the DiLoCo(...) call, not ferry's code
        with pytest.deprecated_call(match=r"ElasticGroup\(\): pass log by keyword"):
            ElasticGroup(comm, {}, print)
