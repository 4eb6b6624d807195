"""comm.all_gather / all_gather_async: every peer's bytes (its own length, 0 and 1 included) to
every peer in rank order; bytes-like, numpy and torch inputs; async beside all-reduces; a mismatch
refused; nothing returned on failure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ferry
from harness import join, run_threads


def contribution(rank: int, n: int, case: int) -> bytes:
    """Rank `rank`'s bytes in `case`: 0, 1 and multi-chunk lengths among them."""
    length = [0, 1, 3 + 70_001 * rank, 2_000_000 if rank == 0 else 0][case % 4]
    return ((np.arange(length, dtype=np.int64) * 7 + rank * 31 + case) % 251).astype(np.uint8).tobytes()


def test_every_peer_gets_every_contribution_in_rank_order(address):
    def body(_):
        with join(address, 3) as comm:
            got = []
            for case in range(4):
                parts = comm.all_gather(contribution(comm.rank, 3, case), tag=case)
                assert comm.last_info is not None and comm.last_info.world_size == 3
                got.append(parts)
            return got

    results = run_threads(3, body, timeout_s=60)
    want = [[contribution(r, 3, case) for r in range(3)] for case in range(4)]
    assert all(isinstance(p, bytes) for p in results[0][0])
    assert results == [want] * 3


def test_numpy_torch_and_writable_buffers_are_sent_as_their_raw_bytes(address):
    def body(_):
        with join(address, 2) as comm:
            r = comm.rank
            array = np.arange(10, dtype=np.float32) + r
            tensor = torch.full((5,), r + 1, dtype=torch.int64)
            mutable = bytearray(b"peer%d" % r)
            return (comm.all_gather(array), comm.all_gather(tensor), comm.all_gather(mutable),
                    comm.all_gather(memoryview(b"")))

    results = run_threads(2, body)
    for arrays, tensors, mutables, empties in results:
        assert [np.frombuffer(p, np.float32).tolist() for p in arrays] == [list(range(10)), list(range(1, 11))]
        assert [np.frombuffer(p, np.int64).tolist() for p in tensors] == [[1] * 5, [2] * 5]
        assert mutables == [b"peer0", b"peer1"]
        assert empties == [b"", b""]


def test_async_all_gathers_beside_all_reduces_waited_out_of_order(address):
    def body(_):
        with join(address, 3) as comm:
            sums = [np.full(40_000, comm.rank + k, np.float32) for k in range(3)]
            gathers, reduces = [], []
            for k in range(3):
                gathers.append(comm.all_gather_async(contribution(comm.rank, 3, k + 1), tag=k))
                reduces.append(comm.all_reduce_async(sums[k], op="sum", tag=k))
            assert gathers[0].output == [] or gathers[0].done()
            for handle in reversed(gathers + reduces):
                assert handle.wait().world_size == 3
            return [g.output for g in gathers], [float(s[0]) for s in sums]

    results = run_threads(3, body, timeout_s=60)
    want = [[contribution(r, 3, k + 1) for r in range(3)] for k in range(3)]
    assert results == [(want, [3.0, 6.0, 9.0])] * 3


def test_a_mismatched_call_is_refused_everywhere_and_returns_nothing(address):
    def body(_):
        with join(address, 2) as comm:
            try:
                if comm.rank == 0:
                    comm.all_gather(b"abc", tag=1)
                else:
                    comm.all_reduce(np.zeros(3, np.uint8))
            except ferry.MismatchError as e:
                message = str(e)
            else:
                message = None
            after = comm.all_gather(b"x" * comm.rank)  # the group carries on, sizes free
            return message, after

    results = run_threads(2, body)
    for message, after in results:
        assert message is not None and "all_gather" in message and "all_reduce" in message
        assert after == [b"", b"x"]


def test_bad_inputs_are_refused_before_anything_is_issued(address):
    def body(_):
        with join(address, 1) as comm:
            with pytest.raises(ferry.InvalidArgumentError):
                comm.all_gather(object())
            with pytest.raises(ferry.InvalidArgumentError):
                comm.all_gather(b"ok", tag=-1)
            return comm.all_gather(b"alone")

    assert run_threads(1, body) == [[b"alone"]]
