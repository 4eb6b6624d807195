"""Releasing what was taken: an unclosed Communicator or Master collected by the garbage
collector warns (ResourceWarning, as an unclosed file) and is closed on a thread of its own,
so the collection never waits for the seconds a close may take; DiLoCo's ``with`` block leaves
the run it joined."""

from __future__ import annotations

import gc
import time
import weakref

import numpy as np
import pytest
import torch

import ferry
from diloco_peer import PEER_ARGS, inner_step, toy
from harness import join, run_threads

SLOW_CLOSE_S = 2.0


@pytest.fixture
def slow_close(monkeypatch):
    """Communicator.close() and Master.close() that take SLOW_CLOSE_S longer (a goodbye to a
    master far away, ops in flight releasing their buffers): what __del__ must not wait for."""
    for cls in (ferry.Communicator, ferry.Master):
        close = cls.close

        def slow(self, close=close):
            time.sleep(SLOW_CLOSE_S)
            close(self)

        monkeypatch.setattr(cls, "close", slow)


def wait_until(predicate, seconds):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.02)


def test_an_unclosed_communicator_warns_and_is_closed_without_blocking_the_collector(address, slow_close):
    comms = run_threads(2, lambda i: join(address, 2))
    survivor, comm = comms
    del comms
    collected = weakref.ref(comm)
    with pytest.warns(ResourceWarning, match=r"unclosed ferry.Communicator \(master '127.0.0.1:\d+'\)"):
        began = time.monotonic()
        del comm
        gc.collect()
        took = time.monotonic() - began
    assert took < SLOW_CLOSE_S / 4, took
    # Closed for real, a moment later: the master dropped it, and then it was freed.
    wait_until(lambda: collected() is None, SLOW_CLOSE_S + 10)

    def alone():
        survivor.update_topology()
        return survivor.world_size == 1

    wait_until(alone, 15)
    survivor.close()


def test_an_unclosed_master_warns_and_is_closed_on_a_thread(slow_close):
    master = ferry.Master("127.0.0.1:0")
    port = master.port
    with pytest.warns(ResourceWarning, match=r"unclosed ferry.Master \('127.0.0.1:0'\)"):
        began = time.monotonic()
        del master
        gc.collect()
        assert time.monotonic() - began < SLOW_CLOSE_S / 4
    time.sleep(SLOW_CLOSE_S + 0.5)
    again = ferry.Master(f"127.0.0.1:{port}")  # the port is free again: the first one closed
    again.close()


def test_a_closed_communicator_collected_says_nothing(address, recwarn):
    comm = join(address, 1)
    comm.close()
    del comm
    gc.collect()
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]


def test_diloco_with_block_leaves_the_run_it_joined(address):
    """Two peers; one's block ends with an exception after an outer step: its communicator is
    closed (the other's next collective fails with PeerLostError at once, not at a deadline);
    the other's block ends normally: finish(), then its communicator is closed too, and the
    outer weights stay readable."""

    def body(shard):
        comm = ferry.Communicator(address, **PEER_ARGS)
        if shard == 0:
            with pytest.raises(RuntimeError, match="stop here"):
                with toy(comm, min_peers=2) as diloco:
                    while not inner_step(diloco, shard):
                        pass
                    raise RuntimeError("stop here")
            assert comm.closed and diloco.closed
            with pytest.raises(ferry.InvalidUsageError, match="after close"):
                diloco.step()
            return None
        with toy(comm, min_peers=2) as diloco:
            while not inner_step(diloco, shard):
                pass
            began = time.monotonic()
            with pytest.raises(ferry.PeerLostError):
                comm.all_reduce(np.ones(4, np.float32))
            lost_after = time.monotonic() - began
            comm.update_topology()
        assert comm.closed
        return lost_after, [p.clone() for p in diloco.outer_params]

    _, (lost_after, outer) = run_threads(2, body)
    assert lost_after < PEER_ARGS["timeout"] / 2, lost_after
    assert all(torch.isfinite(p).all() for p in outer)
