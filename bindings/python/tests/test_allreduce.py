"""all_reduce and all_reduce_many over torch tensors and NumPy arrays: every dtype, every op,
out=, zero-copy, bit-identical results, and the errors of buffer adaptation."""

from __future__ import annotations

import hashlib
import inspect
import typing

import numpy as np
import pytest
import torch

import ferry
from ferry import _lib
from ferry.dtypes import parse_op
from harness import join, run_threads

TORCH_DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
NUMPY_DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
                "float16", "float32", "float64"]
CASES = [("torch", d) for d in TORCH_DTYPES] + [("numpy", d) for d in NUMPY_DTYPES]
N = 1000


def make(kind, dtype, values):
    """A tensor/array of `dtype` holding float64 `values` (exactly representable by construction)."""
    values = np.asarray(values, dtype=np.float64)
    if kind == "numpy":
        return values.astype(dtype)
    return torch.from_numpy(values).to(getattr(torch, dtype))


def as_f64(x):
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64).numpy()
    return x.astype(np.float64)


def raw_bytes(x):
    if isinstance(x, torch.Tensor):
        return x.contiguous().view(torch.uint8).numpy().tobytes()
    return x.tobytes()


def base_values(dtype):
    i = np.arange(N)
    if dtype.startswith("uint"):
        return (i % 40).astype(np.float64)
    if dtype.startswith("int"):
        return (i % 40 - 20).astype(np.float64)
    return (i % 40 - 20) / 4.0  # quarters: exact in f16 and bf16, and so are their sums here


@pytest.mark.parametrize("kind, dtype", CASES, ids=[f"{k}-{d}" for k, d in CASES])
def test_every_dtype_sums_over_three_peers(kind, dtype, address):
    def body(rank_hint):
        with join(address, 3) as comm:
            mine = make(kind, dtype, base_values(dtype) * (comm.rank + 1))
            result = comm.all_reduce(mine, op="sum")
            assert result is mine
            assert comm.last_info.world_size == 3
            return as_f64(mine), raw_bytes(mine)

    results = run_threads(3, body)
    want = as_f64(make(kind, dtype, base_values(dtype) * 6))
    for values, _ in results:
        np.testing.assert_array_equal(values, want)
    assert len({raw for _, raw in results}) == 1


@pytest.mark.parametrize("kind", ["torch", "numpy"])
@pytest.mark.parametrize("op, want", [("sum", [6.0, -6.0]), ("avg", [2.0, -2.0]), ("prod", [6.0, -6.0]),
                                      ("min", [1.0, -3.0]), ("max", [3.0, -1.0])])
def test_every_op(kind, op, want, address):
    def body(_):
        with join(address, 3) as comm:
            r = comm.rank + 1.0
            data = make(kind, "float64", [r, -r if op != "prod" else (-1.0 if r == 1 else r)])
            comm.all_reduce(data, op=op)
            return as_f64(data).tolist()

    assert run_threads(3, body) == [want] * 3


def test_integer_avg_truncates_toward_zero_and_sums_wrap(address):
    def body(_):
        with join(address, 2) as comm:
            a = np.array([-3, 3, 1], np.int32) if comm.rank == 0 else np.array([0, 0, 0], np.int32)
            comm.all_reduce(a, op=ferry.ReduceOp.AVG)
            u = np.array([200, 255], np.uint8)
            comm.all_reduce(u, op="SUM")
            return a.tolist(), u.tolist()

    assert run_threads(2, body) == [([-1, 1, 0], [144, 254])] * 2


def test_the_default_op_is_sum_as_in_the_c_api_and_torch_distributed(address):
    c_default = ferry.ReduceOp(_lib.defaults(_lib.AllreduceDesc, "ferry_allreduce_desc_init").op)
    assert c_default is ferry.ReduceOp.SUM
    for call in (ferry.Communicator.all_reduce, ferry.Communicator.all_reduce_async,
                 ferry.Communicator.all_reduce_many):
        assert parse_op(inspect.signature(call).parameters["op"].default) is c_default, call

    def body(_):
        with join(address, 2) as comm:
            t = torch.full((4,), 2.0 * comm.rank)
            a = np.full(4, 1.0 + comm.rank)
            comm.all_reduce_async(a).wait()
            return comm.all_reduce(t).tolist(), a.tolist(), comm.all_reduce_many([torch.ones(2)])[0].tolist()

    assert run_threads(2, body) == [([2.0] * 4, [3.0] * 4, [2.0, 2.0])] * 2


def test_the_all_reduces_are_typed_to_return_the_callers_tensor_type():
    hints = typing.get_type_hints(ferry.Communicator.all_reduce)
    tensor_type = hints["tensor"]
    assert isinstance(tensor_type, typing.TypeVar)
    assert hints["return"] is tensor_type and hints["out"] == typing.Optional[tensor_type]
    hints = typing.get_type_hints(ferry.Communicator.all_reduce_async)
    assert hints["return"] == ferry.Handle[hints["tensor"]]
    assert typing.get_type_hints(ferry.Handle.output.fget)["return"] in ferry.Handle.__parameters__
    hints = typing.get_type_hints(ferry.Communicator.all_reduce_many)
    assert hints["return"] == typing.List[typing.get_args(hints["tensors"])[0]]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_random_floats_are_bit_identical_on_every_peer(dtype, address):
    def body(_):
        with join(address, 3) as comm:
            gen = torch.Generator().manual_seed(comm.rank)
            t = torch.randn(70_000, generator=gen).to(getattr(torch, dtype))
            comm.all_reduce(t, op="avg")
            return hashlib.sha256(raw_bytes(t)).hexdigest()

    assert len(set(run_threads(3, body))) == 1


def test_results_land_in_the_callers_own_memory(address):
    """Zero-copy: the library writes into the buffer the caller holds; every view sees it."""
    def body(_):
        with join(address, 2) as comm:
            # torch: same storage, and a numpy array sharing it sees the result too
            backing = np.ones(1000, np.float32)
            t = torch.from_numpy(backing)
            ptr, view = t.data_ptr(), t[10:20]
            assert comm.all_reduce(t, op="sum") is t
            assert t.data_ptr() == ptr
            assert view.tolist() == [2.0] * 10 and backing[999] == 2.0
            # numpy: a contiguous slice of a bigger array is reduced where it lies
            base = np.zeros(100, np.float64)
            part = base[40:60]
            part[:] = 1.0
            address_before = part.ctypes.data
            comm.all_reduce(part, op="sum")
            assert part.ctypes.data == address_before
            return base[39], base[40], base[59], base[60]

    assert run_threads(2, body) == [(0.0, 2.0, 2.0, 0.0)] * 2


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_out_receives_the_result_and_the_input_is_untouched(kind, address):
    def body(_):
        with join(address, 2) as comm:
            src = make(kind, "float32", [1.0, 2.0, 3.0])
            if kind == "numpy":
                src.flags.writeable = False  # a read-only input is fine when the result goes to out
            out = make(kind, "float32", [0.0, 0.0, 0.0])
            assert comm.all_reduce(src, op="sum", out=out) is out
            return as_f64(src).tolist(), as_f64(out).tolist()

    assert run_threads(2, body) == [([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])] * 2


def test_a_world_of_one_copies_and_odd_shapes_work(address):
    with join(address, 1) as comm:
        src, out = np.arange(6, dtype=np.int16).reshape(2, 3), np.zeros((2, 3), np.int16)
        comm.all_reduce(src, op="sum", out=out)
        assert out.tolist() == src.tolist()
        scalar = torch.tensor(5.0)
        assert comm.all_reduce(scalar, op="sum").item() == 5.0
        empty = np.zeros(0, np.float32)
        assert comm.all_reduce(empty).size == 0
        assert comm.last_info.world_size == 1
        grad = torch.ones(3, requires_grad=True)
        assert comm.all_reduce(grad, op="max") is grad


def test_op_info_reports_the_transfer(address):
    def body(_):
        with join(address, 2) as comm:
            assert comm.last_info is None
            comm.all_reduce(np.ones(1 << 16, np.float32), op="sum")
            return comm.last_info

    for info in run_threads(2, body):
        assert isinstance(info, ferry.OpInfo)
        assert info.world_size == 2
        assert info.bytes_sent >= (1 << 16) * 4 // 2 and info.bytes_received >= (1 << 16) * 4 // 2
        assert 0 < info.duration_s < 30
        phases = (info.start_s, info.longest_stall_s, info.commit_s)
        assert all(0 <= p <= info.duration_s for p in phases), info
        assert sum(phases) <= info.duration_s, info


def test_all_reduce_many_mixes_kinds_dtypes_and_outs(address):
    def body(_):
        with join(address, 3) as comm:
            r = comm.rank + 1
            tensors = [np.full(10, r, np.float32), torch.full((3, 3), float(r), dtype=torch.float64),
                       torch.full((5,), float(r), dtype=torch.bfloat16), np.full(7, r, np.int64)]
            outs = [None, torch.zeros(3, 3, dtype=torch.float64), None, np.zeros(7, np.int64)]
            results = comm.all_reduce_many(tensors, op="sum", outs=outs, max_in_flight=2, tag=40)
            assert results[0] is tensors[0] and results[1] is outs[1] and results[3] is outs[3]
            assert tensors[1][0, 0].item() == r  # an input with an out is not written
            assert comm.last_info.world_size == 3
            return [float(as_f64(x).ravel()[0]) for x in results]

    assert run_threads(3, body) == [[6.0] * 4] * 3


def test_all_reduce_many_of_nothing(address):
    with join(address, 1) as comm:
        assert comm.all_reduce_many([]) == []


def test_all_reduce_many_refuses_bad_lists(address):
    with join(address, 1) as comm:
        with pytest.raises(ferry.InvalidArgumentError, match="outs has 1 entries for 2"):
            comm.all_reduce_many([np.ones(2), np.ones(2)], outs=[None])
        with pytest.raises(ferry.InvalidArgumentError, match="overflows"):
            comm.all_reduce_many([np.ones(2), np.ones(2)], tag=2**64 - 1)
        with pytest.raises(ferry.InvalidArgumentError):
            comm.all_reduce_many([np.ones(2)], max_in_flight=-1)


@pytest.mark.parametrize("bad, match", [
    (lambda: torch.ones(4, 4).t(), "not contiguous"),
    (lambda: np.ones((4, 4)).T, "not C-contiguous"),
    (lambda: np.ones(4)[::2], "not C-contiguous"),
    (lambda: torch.ones(4, dtype=torch.bool), "torch.bool"),
    (lambda: torch.ones(4, dtype=torch.complex64), "complex64"),
    (lambda: np.ones(4, np.complex128), "dtype <c16"),
    (lambda: np.ones(4, bool), "dtype |b1"),
    (lambda: np.ones(4, ">f4"), "non-native byte order"),
    (lambda: np.ones(4, np.float32).view(np.dtype([("x", np.float32)])), "cannot reduce"),
    (lambda: [1.0, 2.0], "torch.Tensor or numpy.ndarray, not list"),
    (lambda: torch.ones(4, device="meta"), "device meta"),
    (lambda: torch.ones(4).to_sparse(), "sparse"),
])
def test_unusable_buffers_are_invalid_arguments(bad, match, address):
    with join(address, 1) as comm:
        with pytest.raises(ferry.InvalidArgumentError, match=match) as info:
            comm.all_reduce(bad())
        assert isinstance(info.value, ValueError)
        with pytest.raises(ferry.InvalidArgumentError, match=match):
            comm.all_reduce_async(bad())


def test_read_only_arrays_and_mismatched_outs_are_invalid_arguments(address):
    with join(address, 1) as comm:
        frozen = np.ones(4, np.float32)
        frozen.flags.writeable = False
        with pytest.raises(ferry.InvalidArgumentError, match="read-only"):
            comm.all_reduce(frozen)
        with pytest.raises(ferry.InvalidArgumentError, match="read-only"):
            comm.all_reduce(np.ones(4, np.float32), out=frozen)
        with pytest.raises(ferry.InvalidArgumentError, match="shape"):
            comm.all_reduce(np.ones(4, np.float32), out=np.ones(5, np.float32))
        with pytest.raises(ferry.InvalidArgumentError, match="shape"):
            comm.all_reduce(np.ones((2, 2), np.float32), out=np.ones(4, np.float32))
        with pytest.raises(ferry.InvalidArgumentError, match="dtype"):
            comm.all_reduce(torch.ones(4), out=torch.ones(4, dtype=torch.float64))
        with pytest.raises(ferry.InvalidArgumentError, match="overlap"):
            base = np.ones(8, np.float32)
            comm.all_reduce(base[0:4], out=base[2:6])


def test_bad_ops_tags_and_quantization_are_invalid_arguments(address):
    with join(address, 1) as comm:
        data = np.ones(4, np.float32)
        with pytest.raises(ferry.InvalidArgumentError, match="reduce op"):
            comm.all_reduce(data, op="median")
        with pytest.raises(ferry.InvalidArgumentError, match="reduce op"):
            comm.all_reduce(data, op=17)
        with pytest.raises(ferry.InvalidArgumentError, match="tag"):
            comm.all_reduce(data, tag=-1)
        with pytest.raises(ferry.InvalidArgumentError, match="unknown quantization"):
            comm.all_reduce(data, quant="u7")
        with pytest.raises(ferry.InvalidArgumentError, match="unknown quantization"):
            comm.all_reduce_many([data], quant=8)
        # Quantization is for float data; f16/bf16 wire types for f32/f64 data only (ferry.h).
        for name in ferry.QUANT_NAMES:
            with pytest.raises(ferry.InvalidArgumentError, match="quant"):
                comm.all_reduce(np.ones(4, np.int32), quant=name)
        for name in ("f16", "bf16"):
            with pytest.raises(ferry.InvalidArgumentError, match="quant"):
                comm.all_reduce(np.ones(4, np.float16), quant=name)
        # The integer-domain modes add integers: sum and avg only.
        for name in ("i8h", "i4h-sr"):
            with pytest.raises(ferry.InvalidArgumentError, match="FERRY_OP_SUM"):
                comm.all_reduce(data, op="max", quant=name)
        assert comm.all_reduce(data, quant=None, op="sum") is data


@pytest.mark.parametrize("quant, shrink, tol", [("u8", 0.30, 0.03), ("i8", 0.30, 0.03), ("u4", 0.16, 0.5),
                                                ("f16", 0.55, 5e-3), ("bf16", 0.55, 5e-2), ("U8", 0.30, 0.03),
                                                ("i8h", 0.30, 0.03), ("i8h-sr", 0.30, 0.06), ("i4h", 0.17, 0.5),
                                                ("i4h-sr", 0.17, 0.8)])
@pytest.mark.parametrize("call", ["all_reduce", "all_reduce_async", "all_reduce_many"])
def test_quantized_avg_is_close_bit_identical_and_smaller_on_the_wire(quant, shrink, tol, call, address):
    """quant= reaches the C desc: fewer bytes on the wire, a close (lossy) result, and the
    same bits on every peer."""
    n = 1 << 14

    def body(_):
        with join(address, 2) as comm:
            rng = np.random.default_rng(comm.rank)
            data = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
            exact = comm.all_reduce(data.clone(), op="avg")
            plain_bytes = comm.last_info.bytes_sent
            if call == "all_reduce":
                comm.all_reduce(data, op="avg", quant=quant)
                info = comm.last_info
            elif call == "all_reduce_async":
                info = comm.all_reduce_async(data, op="avg", quant=quant).wait()
            else:
                comm.all_reduce_many([data], op="avg", quant=quant)
                info = comm.last_info
            return exact.numpy(), data.numpy().copy(), plain_bytes, info.bytes_sent, info.quant_agreement_s

    results = run_threads(2, body)
    (exact, got, plain_bytes, sent, agreement), (_, other, _, _, _) = results
    # Only the integer-domain modes agree scales before the ring, and say how long it took.
    assert (agreement > 0) == quant.lower().startswith(("i8h", "i4h"))
    assert got.tobytes() == other.tobytes()
    assert 0 < sent < shrink * plain_bytes
    assert np.max(np.abs(got - exact)) < tol
    assert not np.array_equal(got, exact)  # it really was quantized


@pytest.mark.parametrize("shared_memory", [True, False])
def test_peers_on_one_host_share_memory_only_when_asked_and_agree_either_way(shared_memory, address):
    def body(rank):
        with join(address, 3, connections=2, shared_memory=shared_memory) as comm:
            t = np.arange(100_003, dtype=np.float32) * (rank + 1)
            comm.all_reduce(t, op="sum")
            return comm.shared_memory_lanes, t.tobytes()
    results = run_threads(3, body)
    assert [lanes for lanes, _ in results] == [4 if shared_memory else 0] * 3
    want = (np.arange(100_003, dtype=np.float32) * 6).tobytes()
    assert all(got == want for _, got in results)
