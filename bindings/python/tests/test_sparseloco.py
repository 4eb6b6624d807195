"""SparseLoCo (ferry.diloco, sparse=): the outer step against a hand reference of the codec and
the error feedback for two steps; bit-identical peers in every mode; resume from state_dict();
a newcomer mid-run (its accumulator starts at zero); a peer killed inside the all-gather (the
survivors redo it, the accumulators change once); the codec's Python calls; option checks."""

from __future__ import annotations

import io
import threading
import time

import pytest
import torch

import ferry
import ferry.sparse
from diloco_peer import PEER_ARGS, SYNC_EVERY, Vector, bits, gradient, inner_step, tiny_mlp_peer
from ferry.diloco import DiLoCo, SparseLoCo
from ferry.sparseloco import ErrorFeedback
from harness import run_threads, run_with_own_master

# One chunk of 4 holds the toy's vector; 2 of 4 sent at 4 bits: quantization error to carry.
TOY_SPARSE = SparseLoCo(density=0.5, chunk=4, bits=4, decay=0.5)


def sparse_toy(comm, sparse=TOY_SPARSE, **kwargs) -> DiLoCo:
    model = Vector(kwargs.pop("layers", 1))
    inner = torch.optim.SGD(model.parameters(), lr=1.0, momentum=kwargs.pop("inner_momentum", 0.0))
    # Outer lr 1: the replay's theta - mean is then exact whatever torch's SGD fuses.
    return DiLoCo(comm, model, inner, sync_every=kwargs.pop("sync_every", SYNC_EVERY), sparse=sparse, outer_lr=1.0,
                  **kwargs)


def top_k_quantized(e: torch.Tensor, chunk: int, k: int, bits: int) -> torch.Tensor:
    """What the codec sends of e, by its definition (src/core/sparse_codec.h), in float32: per
    chunk the k largest |x| (ties: the lower index), lo/step from their least and greatest
    magnitude, m = round-half-even((|x| - lo) / step) clamped to 0..L, v = lo + m * step."""
    levels = 2 ** (bits - 1) - 1
    out = torch.zeros_like(e)
    for start in range(0, e.numel(), chunk):
        x = e[start:start + chunk]
        mags = x.abs()
        chosen = sorted(sorted(range(x.numel()), key=lambda i: (-mags[i].item(), i))[:min(k, x.numel())])
        lo = min(mags[i] for i in chosen)
        step = (max(mags[i] for i in chosen) - lo) / levels
        for i in chosen:
            m = torch.zeros(()) if step == 0 else torch.round(((mags[i] - lo) / step).clamp(0, levels))
            v = lo + m * step
            out[start + i] = -v if x[i] < 0 or (x[i] == 0 and torch.signbit(x[i])) else v
    return out


def replay(members_at):
    """theta, each shard's accumulator and what each sent at the last step, after
    len(members_at) outer steps of the toy, step t averaging shards members_at[t]: the steps
    of ferry/sparseloco.py written out (inner SGD lr 1, H = SYNC_EVERY, outer lr 1)."""
    o = TOY_SPARSE
    theta = torch.zeros(4)
    e = {s: torch.zeros(4) for members in members_at for s in members}
    for t, members in enumerate(members_at):
        sent = {}
        for s in members:
            local = theta.clone()
            for i in range(SYNC_EVERY):
                local.add_(gradient(s, t * SYNC_EVERY + i), alpha=-1.0)
            e[s] = o.decay * e[s] + (theta - local)
            sent[s] = top_k_quantized(e[s], o.chunk, o.spec.k, o.bits)
            e[s] = e[s] - sent[s]
        total = torch.zeros(4)
        for s in members:
            total = total + sent[s]  # rank order, from +0
        theta = theta - total / len(members)
    return theta, e, sent


def test_outer_step_is_sgd_on_the_mean_of_the_sent_top_k_with_error_feedback(address):
    """Two peers, 2 outer steps of H = 3 (inner SGD lr 1 on the toy's quarter-integer
    gradients): e = decay e + delta, c = TopK_Q(e), e -= c, theta -= lr (c_0 + c_1) / 2."""

    def body(shard):
        with ferry.Communicator(address, **PEER_ARGS) as comm, sparse_toy(comm, min_peers=2) as diloco:
            returned = [inner_step(diloco, shard) for _ in range(2 * SYNC_EVERY)]
            return (returned, diloco.outer_params[0].clone(), diloco.model.w.detach().clone(),
                    diloco.feedback[0].accumulator.clone(), diloco.bytes_sent)

    results = run_threads(2, body)
    theta, e, sent = replay([(0, 1), (0, 1)])
    assert (sent[0] != 0).sum() == 2  # 2 of 4 sent
    assert e[0].abs().sum() > 0  # something was carried
    for s, (returned, outer, local, accumulator, sent_bytes) in enumerate(results):
        assert returned == [False, False, True] * 2
        assert torch.equal(outer, theta)
        assert torch.equal(local, outer)
        assert torch.equal(accumulator, e[s])
        assert sent_bytes > 0


@pytest.mark.parametrize("world,options", [
    (2, {}), (3, {}), (3, dict(overlap=True)), (3, dict(fragments=2, overlap=True)), (3, dict(fragments=2)),
    (3, dict(inner_time=0.05)),
], ids=["2", "3", "3-overlap", "3-streaming", "3-fragments", "3-timeboxed"])
def test_peers_end_with_bit_identical_weights(address, world, options):
    sparse = SparseLoCo(density=0.1, chunk=64, bits=2)
    results = run_threads(world, lambda shard: tiny_mlp_peer(address, shard, world, 3, None, sparse=sparse,
                                                             **options))
    assert len({outer for outer, _, _ in results}) == 1
    assert all(local == outer for outer, local, _ in results)


def test_state_dict_round_trips_and_resumes_bit_identically():
    """Two peers run 3 outer steps straight; two others stop after 1 outer step and 1 inner
    step, save (torch.save), load into fresh objects and run on: the same theta, models and
    each peer's own accumulator, bit for bit."""

    def run(address, shard, stop_at=None, state=None):
        with ferry.Communicator(address, **PEER_ARGS) as comm:
            diloco = sparse_toy(comm, layers=2, sync_every=4, fragments=2, inner_momentum=0.5, min_peers=2)
            if state is not None:
                diloco.load_state_dict(torch.load(io.BytesIO(state)))
            diloco.join()
            while diloco.outer_step < 3:
                if (diloco.outer_step, diloco.inner_step) == stop_at:
                    saved = io.BytesIO()
                    torch.save(diloco.state_dict(), saved)
                    return saved.getvalue()
                inner_step(diloco, shard)
            diloco.finish()
            mine = [fb.accumulator for fb in diloco.feedback]
            return bits(diloco.outer_params + list(diloco.model.parameters())), bits(mine)

    straight = run_with_own_master(2, run)
    saved = run_with_own_master(2, lambda a, s: run(a, s, stop_at=(1, 1)))
    resumed = run_with_own_master(2, lambda a, s: run(a, s, state=saved[s]))
    assert straight[0][0] == straight[1][0] == resumed[0][0] == resumed[1][0]
    assert straight[0][1] != straight[1][1]  # accumulators are each peer's own
    assert [r[1] for r in resumed] == [r[1] for r in straight]


def test_a_newcomer_starts_with_a_zero_accumulator_and_ends_bit_identical(address):
    outer_steps = 4
    first_done = threading.Event()

    def body(shard):
        if shard == 2:
            first_done.wait(20)
        with ferry.Communicator(address, **PEER_ARGS) as comm, \
                sparse_toy(comm, min_peers=2 if shard < 2 else 1) as diloco:
            joined = (diloco.outer_step, diloco.feedback[0].accumulator.clone())
            while diloco.outer_step < outer_steps:
                if inner_step(diloco, shard) and shard < 2:
                    first_done.set()
                    time.sleep(0.3)  # leave the newcomer time to arrive mid-run
            diloco.finish()
            return bits(diloco.outer_params), joined, comm.world_size, diloco.feedback[0].accumulator.clone()

    (a, _, _, acc_a), (b, _, _, _), (c, (joined_at, joined_acc), world, acc_c) = run_threads(3, body)
    assert a == b == c and world == 3
    assert 1 <= joined_at < outer_steps
    assert torch.equal(joined_acc, torch.zeros(4))
    assert acc_c.abs().sum() > 0 and not torch.equal(acc_c, acc_a)  # it trained and sent from then on


def test_a_peer_lost_before_the_all_gather_is_redone_and_the_accumulators_change_once(address):
    """Three peers; in outer step 1 the third leaves just before its sync point, so the
    survivors' all-gather fails; they re-form and gather the same bytes again: their theta is
    the mean over {0, 1} of what each sent, and each accumulator took one update per outer
    step (a hand replay: the first step's mean over all three, then over the two)."""

    class Leave(Exception):
        pass

    def body(shard):
        try:
            with ferry.Communicator(address, **PEER_ARGS) as comm, sparse_toy(comm, min_peers=3) as diloco:
                while diloco.outer_step < 3:
                    if shard == 2 and (diloco.outer_step, diloco.inner_step) == (1, SYNC_EVERY - 1):
                        raise Leave()  # out of the with blocks: no finish(), the communicator closes
                    inner_step(diloco, shard)
                diloco.finish()
                return bits(diloco.outer_params), diloco.feedback[0].accumulator.clone(), diloco.group.revision
        except Leave:
            return None

    results = run_threads(3, body, timeout_s=60)
    assert results[2] is None
    theta, e, _ = replay([(0, 1, 2), (0, 1), (0, 1)])
    for s in (0, 1):
        assert results[s][0] == bits([theta])
        assert torch.equal(results[s][1], e[s])
        assert results[s][2] >= 1  # the ring was re-formed (a vote and a sync) after the loss


def test_codec_calls_round_trip_and_refuse_bad_input():
    spec = ferry.sparse.SparseSpec(chunk=64, density=0.05, bits=8)
    assert spec.k == 3
    x = torch.randn(1000, generator=torch.Generator().manual_seed(1))
    residual = torch.empty(1000)
    data = ferry.sparse.encode(x, spec, residual=residual)
    assert data == ferry.sparse.encode(x.clone(), spec)  # a pure function of the input's bits
    alone = ferry.sparse.decode_sum([data], torch.empty(1000))
    assert torch.equal(residual, x - alone)
    assert int((alone != 0).sum()) == 16 * 3  # 15 chunks of 64 and one of 40, 3 entries each
    both = ferry.sparse.decode_sum([data, b"", data], torch.empty(1000))
    assert torch.equal(both, alone + alone)
    with pytest.raises(ferry.ProtocolError, match="rank 1: "):
        ferry.sparse.decode_sum([data, data[:-1]], torch.full((1000,), 7.0))
    with pytest.raises(ferry.InvalidArgumentError, match="float32, bfloat16, float16"):
        ferry.sparse.encode(torch.zeros(10, dtype=torch.int32), spec)
    with pytest.raises(ferry.InvalidArgumentError, match="density"):
        ferry.sparse.SparseSpec(density=0)
    with pytest.raises(ferry.InvalidArgumentError, match="bits"):
        ferry.sparse.SparseSpec(bits=3)
    with pytest.raises(ferry.InvalidArgumentError, match="residual must be float32"):
        ferry.sparse.encode(x, spec, residual=torch.empty(999))


def test_a_fragment_is_cut_into_equal_chunks_so_every_chunk_sends_the_density():
    """201 elements in chunks of at most 100: three chunks of 67 (k = round(0.05 x 67) = 3
    each: 9 sent), not 100, 100 and 1 (5 + 5 + 1 = 11: the lone last element always sent)."""
    options = SparseLoCo(density=0.05, chunk=100)
    feedback = ErrorFeedback(201, options)
    assert feedback.spec == ferry.sparse.SparseSpec(chunk=67, density=0.05, bits=2)
    assert options.spec_for(200).chunk == 100 and options.spec_for(1).chunk == 1
    x = torch.randn(201, generator=torch.Generator().manual_seed(3))
    sent = ferry.sparse.decode_sum([feedback.contribute(x, 1.0).data], torch.empty(201))
    assert int((sent != 0).sum()) == 9
    assert torch.equal(feedback.accumulator, x - sent)


def test_options_are_checked():
    model = Vector()
    inner = torch.optim.SGD(model.parameters(), lr=1.0)
    comm = ferry.Communicator("127.0.0.1:1")
    try:
        with pytest.raises(ferry.InvalidArgumentError, match="sparse and quant"):
            DiLoCo(comm, model, inner, sync_every=3, sparse=True, quant="u8")
        with pytest.raises(ferry.InvalidArgumentError, match="no outer momentum"):
            DiLoCo(comm, model, inner, sync_every=3, sparse=True, outer_momentum=0.9)
        with pytest.raises(ferry.InvalidArgumentError, match="decay"):
            SparseLoCo(decay=1.5)
        with pytest.raises(ferry.InvalidArgumentError, match="chunk"):
            SparseLoCo(chunk=0)
        d = DiLoCo(comm, model, inner, sync_every=3, sparse=True)
        assert d.sparse == SparseLoCo() and d.fragments[0].outer.optimizer.defaults["lr"] == 7.0
        assert d.fragments[0].outer.optimizer.defaults["momentum"] == 0.0
        plain = DiLoCo(comm, model, inner, sync_every=3)
        assert plain.feedback is None and plain.fragments[0].outer.optimizer.defaults["momentum"] == 0.9
    finally:
        comm.close()
