"""DiLoCo's loose ends (issue 42, items 7-9): a ``with`` block that ends normally finishes the
run (no reduction left in flight, every peer keeps theta); options are checked at
construction (an unknown quantization fails before any training); module buffers are synced
at every outer step (float ones averaged by weight, integer ones the leader's; off with
sync_buffers=False); a model mismatch names the parameter and its dtype by name."""

from __future__ import annotations

import pytest
import torch

import ferry
from diloco_peer import PEER_ARGS, toy
from ferry.diloco import DiLoCo
from harness import run_threads


def bits(tensors) -> bytes:
    return b"".join(t.detach().contiguous().numpy().tobytes() for t in tensors)


def test_a_with_block_that_ends_normally_finishes_the_overlapped_run(address):
    """Overlapped, the last reduction is in flight when the loop ends; leaving the block must
    apply it, so both peers hold theta (before: each kept its own local copy, silently)."""

    def body(shard):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
        inner = torch.optim.SGD(model.parameters(), lr=0.1)
        data = torch.Generator().manual_seed(shard)
        with ferry.Communicator(address, **PEER_ARGS) as comm:
            with DiLoCo(comm, model, inner, sync_every=3, min_peers=2, overlap=True) as diloco:
                while diloco.outer_step < 2:
                    x = torch.randn(8, 4, generator=data)
                    inner.zero_grad()
                    model(x).square().mean().backward()
                    inner.step()
                    diloco.step()
                in_flight = diloco.pending is not None
            return in_flight, bits(model.parameters()), bits(diloco.outer_params)

    (flight0, local0, outer0), (flight1, local1, outer1) = run_threads(2, body)
    assert flight0 and flight1
    assert local0 == outer0 == local1 == outer1


def test_a_with_block_left_by_an_exception_finishes_nothing(address):
    """An error inside the block must surface as itself, not as a collective that waits."""
    with ferry.Communicator(address, **PEER_ARGS) as comm:
        with pytest.raises(KeyError):
            with toy(comm, overlap=True) as diloco:
                raise KeyError("the training loop's own error")
        assert not diloco.finished


def test_options_fail_at_construction(address):
    """An unknown quantization (before: found at the first outer step, after H inner steps),
    a bad min_peers, neither sync_every nor inner_time, a bad cap, a bad weight_by."""
    model = torch.nn.Linear(2, 2)
    inner = torch.optim.SGD(model.parameters(), lr=0.1)
    comm = ferry.Communicator(address, **PEER_ARGS)
    for bad in (dict(quant="u9"), dict(quant="int8"), dict(min_peers=0), dict(inner_time=1.0, sync_every=0),
                dict(sync_every=None), dict(sync_every=None, inner_time=0), dict(sync_every=None, inner_time=1.0,
                                                                                 weight_by="flops"),
                dict(sync_every=True), dict(min_work=-1)):
        options = {"sync_every": 4, **bad}
        with pytest.raises(ferry.InvalidArgumentError) as info:
            DiLoCo(comm, model, inner, **options)
        if "quant" in bad:
            assert repr(bad["quant"]) in str(info.value) and "u8" in str(info.value)
    comm.close()


class Normed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.norm = torch.nn.BatchNorm1d(3)


def normed_peer(address, shard, sync_buffers):
    torch.manual_seed(0)
    model = Normed()
    inner = torch.optim.SGD(model.parameters(), lr=0.0)  # buffers only: the weights stay put
    data = torch.Generator().manual_seed(10 + shard)
    with ferry.Communicator(address, **PEER_ARGS) as comm, \
            DiLoCo(comm, model, inner, sync_every=2, min_peers=2, sync_buffers=sync_buffers) as diloco:
        for _ in range(2):
            model.norm(torch.randn(5, 3, generator=data) * (shard + 1) + shard)  # running stats move
            inner.step()
            if diloco.inner_step == 1:  # before the sync point: this peer's own buffers
                model.norm.num_batches_tracked += 10 * comm.rank  # the leader's count must win
                before = (model.norm.running_mean.clone(), model.norm.running_var.clone(),
                          int(model.norm.num_batches_tracked), comm.rank)
            diloco.step()
        return before, {k: v.clone() for k, v in model.norm.state_dict().items()}


def test_module_buffers_are_synced_at_the_outer_step(address):
    """BatchNorm on two peers seeing different data: after the outer step the running mean and
    variance are the mean of the peers' (equal weights), and num_batches_tracked is rank 0's;
    every peer holds the same bits (before: each kept its own, diverging silently)."""
    results = run_threads(2, lambda shard: normed_peer(address, shard, True))
    (before0, after0), (before1, after1) = results
    assert not torch.equal(before0[0], before1[0])
    assert bits(after0.values()) == bits(after1.values())
    for i, key in ((0, "running_mean"), (1, "running_var")):
        mean = (before0[i] * 1.0 + before1[i] * 1.0) / 2.0
        assert torch.equal(after0[key], mean), key
    leader = before0 if before0[3] == 0 else before1
    assert int(after0["num_batches_tracked"]) == leader[2] == 2


def test_sync_buffers_false_leaves_each_peer_its_own(address):
    (before0, after0), (before1, after1) = run_threads(2, lambda shard: normed_peer(address, shard, False))
    assert torch.equal(after0["running_mean"], before0[0]) and torch.equal(after1["running_mean"], before1[0])
    assert not torch.equal(after0["running_mean"], after1["running_mean"])


def test_a_model_mismatch_names_the_parameter_and_its_dtype(address):
    """Two peers with different widths: both fail at the first sync with a message naming the
    parameter and 'float32' (before: 'outer.momentum.0' (dtype 10, 64 elements))."""

    def body(shard):
        model = torch.nn.Sequential(torch.nn.Linear(4, 3 + 2 * shard))
        inner = torch.optim.SGD(model.parameters(), lr=0.1)
        with ferry.Communicator(address, **PEER_ARGS) as comm:
            diloco = DiLoCo(comm, model, inner, sync_every=2, min_peers=2)
            with pytest.raises(ferry.MismatchError) as info:
                diloco.join(timeout=20)
            return str(info.value)

    for message in run_threads(2, body):
        assert "parameter '0.weight'" in message and "float32" in message and "dtype 10" not in message, message
