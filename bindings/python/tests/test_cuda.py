"""CUDA tensors staged on ferry's own stream (ferry.cuda_stage, ferry.issue_queue, ferry.pinned_pool).

The first tests check the logic that needs no GPU (the pinned pool's bound, the issue queue's
order, a deferred issue through a Communicator); the rest need CUDA and are skipped without
it: a mixed run (CUDA peer and host peer) bit-identical, the training stream not blocked,
Handle.wait() a stream wait rather than a host sync, a failed reduction leaving the CUDA
tensor untouched, shared state and DiLoCo with outer weights on the GPU.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import ferry
from ferry import reduce_calls
from ferry.cuda_stage import side_stream
from ferry.issue_queue import IssueQueue
from ferry.pinned_pool import PinnedPool
from ferry.tensors import ReducePlan
from harness import child_env, join, make_peer, run_threads

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA device (torch.cuda.is_available() is False)")


# ------------------------------------------------------------------ without a GPU


class FakeEvent:
    def __init__(self, done: bool) -> None:
        self.done = done

    def query(self) -> bool:
        return self.done


def fake_pool(limit: int):
    made = []

    def allocate(key, nbytes):
        made.append((key, nbytes))
        return bytearray(nbytes)

    return PinnedPool(allocate, limit), made


def test_the_pool_reuses_a_buffer_by_key_once_its_copy_has_completed():
    pool, made = fake_pool(1 << 20)
    a = pool.take((10, "f32"), 40)
    pool.give((10, "f32"), a, 40, FakeEvent(False))
    b = pool.take((10, "f32"), 40)  # a's copy back still runs: a new buffer
    assert b is not a and len(made) == 2
    pool.give((10, "f32"), b, 40, FakeEvent(True))
    assert pool.take((10, "i32"), 40) is not b  # another dtype: never shared
    assert pool.take((10, "f32"), 40) is b
    assert pool.held_bytes == 40  # a is still idle
    assert pool.take((10, "f32"), 40, stream="other") is not a
    assert pool.take((10, "f32"), 40, stream="ferry's") is not a
    c = pool.take((10, "f32"), 40)
    pool.give((10, "f32"), c, 40, FakeEvent(False), "ferry's")
    # Its copy back still runs, but on the stream the new user's copies will follow it on.
    assert pool.take((10, "f32"), 40, stream="ferry's") is c


def test_the_pool_drops_the_oldest_idle_buffers_beyond_its_limit():
    pool, _ = fake_pool(100)
    bufs = [pool.take((i, "u8"), 40) for i in range(3)]
    for i, buf in enumerate(bufs):
        pool.give((i, "u8"), buf, 40)
    assert pool.held_bytes == 80  # the first was dropped to stay within 100 bytes
    assert pool.take((0, "u8"), 40) is not bufs[0]
    assert pool.take((2, "u8"), 40) is bufs[2]
    pool.set_limit(0)
    assert pool.held_bytes == 0
    big = pool.take((99, "u8"), 1000)
    pool.give((99, "u8"), big, 1000)  # larger than the limit alone: not kept
    assert pool.held_bytes == 0


def test_the_pinned_pool_limit_is_checked():
    with pytest.raises(ferry.InvalidArgumentError):
        ferry.set_pinned_pool_limit(-1)


def test_the_issue_queue_runs_jobs_in_order_and_drain_waits_for_them():
    queue = IssueQueue("test-issue")
    ran = []

    def job(k):
        def run():
            time.sleep(0.02)
            if k == 1:
                raise RuntimeError("a broken job must not wedge the queue")
            ran.append(k)
        return run

    for k in range(4):
        queue.submit(job(k))
    assert queue.busy()
    queue.drain()
    assert ran == [0, 2, 3] and not queue.busy()
    queue.submit(job(4))  # the worker exited when idle; a submit starts it again
    queue.drain()
    assert ran == [0, 2, 3, 4]


class SlowCopyPlan(ReducePlan):
    """A host plan that behaves as a CUDA one: the copy of a 1000-element input to host memory
    takes 0.3 s on peer 0, every other copy no time (were the order not kept, only peer 0's
    would change)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.on_device = True
        slow = threading.current_thread().name == "peer-0" and self.count == 1000
        self.copy_s = 0.3 if slow else 0.0

    def wait_copied(self) -> None:
        time.sleep(self.copy_s)


@pytest.fixture
def slow_copies(monkeypatch):
    monkeypatch.setattr(reduce_calls, "plan_allreduce", lambda t, out=None, name="tensor": SlowCopyPlan(t, out, name))


def test_an_async_issue_waiting_for_its_copy_returns_at_once_and_keeps_the_order(address, slow_copies):
    def body(i):
        with join(address, 2) as comm:
            a = np.full(1000, float(i + 1), np.float32)
            began = time.monotonic()
            handle = comm.all_reduce_async(a, tag=1)
            assert time.monotonic() - began < 0.2  # the copy is waited for on ferry's issue thread
            if i == 1:
                time.sleep(0.1)  # its issue is done: peer 1 issues tag 1, 2, 3 in this order
            else:
                assert not handle.done()
            behind = comm.all_reduce_async(np.ones(4, np.float64), tag=2)  # peer 0: queued behind it
            # A blocking collective drains the queue first: else it would overtake them on peer 0.
            b = comm.all_reduce(np.ones(8, np.float64), tag=3)
            handle.wait()
            behind.wait()
            return float(a[0]), float(behind.output[0]), float(b[0])

    assert run_threads(2, body) == [(3.0, 2.0, 2.0)] * 2


def test_a_finished_cuda_op_is_reaped_before_wait_so_its_copy_back_starts_at_once(address, slow_copies):
    def body(i):
        with join(address, 2) as comm:
            a = np.full(1000, float(i + 1), np.float32)
            handle = comm.all_reduce_async(a)
            deadline = time.monotonic() + 10
            while "done" not in repr(handle):  # settled (results in place) without a wait()
                assert time.monotonic() < deadline, "the finished op was not reaped"
                time.sleep(0.01)
            assert handle.wait().world_size == 2
            return float(a[0])

    assert run_threads(2, body) == [3.0, 3.0]


def test_an_issue_still_queued_when_the_communicator_closes_fails_its_wait(address, slow_copies):
    def body(i):
        comm = join(address, 2)
        handle = comm.all_reduce_async(np.ones(16, np.float32))
        comm.close()
        with pytest.raises(ferry.InvalidUsageError):
            handle.wait()
        return "closed" in repr(handle) or "failed" in repr(handle)

    assert run_threads(2, body) == [True, True]


NUMPY_ONLY = """
import sys, threading, numpy as np, ferry
master = ferry.Master("127.0.0.1:0"); master.start()
out = [None, None]
def peer(i):
    with ferry.Communicator(f"127.0.0.1:{master.port}", listen_host="127.0.0.1", timeout=10) as c:
        c.connect(); c.wait_for_world(2, timeout=15)
        a = np.ones(8, np.float32); c.all_reduce(a)
        b = np.ones(8, np.float32); c.all_reduce_async(b).wait()
        out[i] = float(a[0] + b[0])
threads = [threading.Thread(target=peer, args=(i,)) for i in range(2)]
[t.start() for t in threads]; [t.join(30) for t in threads]
master.close()
assert "torch" not in sys.modules, "ferry imported torch"
print(out)
"""


def test_host_arrays_need_no_torch():
    done = subprocess.run([sys.executable, "-c", NUMPY_ONLY], env=child_env(), capture_output=True, text=True,
                          timeout=50)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[4.0, 4.0]"


# ------------------------------------------------------------------ on a GPU

CASES = [("sum", None), ("avg", None), ("avg", "u8"), ("sum", "i8h")]


def reduce_all(comm, tensors, on_gpu):
    out = []
    for k, (op, quant) in enumerate(CASES):
        t = tensors[k].cuda() if on_gpu else tensors[k].clone()
        comm.all_reduce(t, op=op, tag=10 + k, quant=quant)
        out.append(t.cpu())  # on the current stream, after the copy back it waits for
        src = tensors[k].cuda() if on_gpu else tensors[k].clone()
        dst = torch.empty_like(src)
        comm.all_reduce_async(src, op=op, tag=20 + k, out=dst, quant=quant).wait()
        out.append(dst.cpu())
    return out


def inputs(rank):
    g = torch.Generator().manual_seed(1234 + rank)
    return [torch.randn(100_003, generator=g) * (k + 1) for k in range(len(CASES))]


@needs_cuda
def test_a_cuda_peer_and_a_host_peer_get_bit_identical_results(address):
    def run(gpu_ranks):
        def body(i):
            with join(address, 2) as comm:
                return comm.rank, reduce_all(comm, inputs(comm.rank), comm.rank in gpu_ranks)
        return dict(run_threads(2, body, timeout_s=60))

    mixed = run({0})
    host = run(set())
    for k in range(2 * len(CASES)):
        assert torch.equal(mixed[0][k].view(torch.int32), mixed[1][k].view(torch.int32)), CASES[k // 2]
        assert torch.equal(mixed[0][k].view(torch.int32), host[0][k].view(torch.int32)), CASES[k // 2]


def busy_loop(seconds: float):
    """Enqueues matmuls worth about ``seconds`` on the current stream; returns without waiting."""
    # Large matmuls: few kernels per second, so the launch queue never fills and the host returns at once.
    a = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    began = time.monotonic()
    for _ in range(5):
        a = a @ a
        a = a / a.norm()
    torch.cuda.synchronize()
    per = (time.monotonic() - began) / 5
    for _ in range(max(1, int(seconds / per))):
        a = a @ a
        a = a / a.norm()
    return a


@needs_cuda
@pytest.mark.deadline(90)
def test_the_training_stream_is_never_blocked_by_the_reduction(address):
    host_peer_go = threading.Event()

    def body(i):
        with join(address, 2) as comm:
            if i == 1:
                comm.all_reduce(torch.ones(1 << 20))  # the warm-up
                assert host_peer_go.wait(30)
                data = torch.full((1 << 20,), 2.0)
                comm.all_reduce(data)
                return data[0].item()
            t = torch.full((1 << 20,), 1.0, device="cuda")
            comm.all_reduce(t.clone())  # warm-up: ferry's stream exists and the pinned buffer is pooled
            stream = torch.cuda.current_stream()
            busy_loop(0.5)  # the training stream is busy when the reduction is issued
            began = time.monotonic()
            handle = comm.all_reduce_async(t)
            issued_in = time.monotonic() - began
            assert not stream.query(), "the issue waited for the training stream"
            assert issued_in < 0.1, f"all_reduce_async took {issued_in:.3f} s"
            assert side_stream(t.device) != stream  # ferry copies on a stream of its own
            # The training stream's work finishes while the other peer has not even issued.
            busy_loop(0.2)
            stream.synchronize()
            assert handle._op.issued.wait(5), "ferry's copy to host memory never landed"
            assert not handle.done()
            host_peer_go.set()
            handle.wait()
            return t[0].item()

    assert run_threads(2, body, timeout_s=80) == [3.0, 3.0]


@needs_cuda
@pytest.mark.deadline(90)
def test_handle_wait_makes_the_current_stream_wait_and_does_not_sync_the_host(address):
    def body(i):
        with join(address, 2) as comm:
            t = torch.full((1 << 20,), float(i + 1), device="cuda")
            handle = comm.all_reduce_async(t)
            deadline = time.monotonic() + 20
            while not handle.done():
                assert time.monotonic() < deadline
                time.sleep(0.01)
            stream = torch.cuda.current_stream()
            busy_loop(0.5)
            handle.wait()  # the stream waits for the copy back; the host waits for nothing
            assert not stream.query(), "Handle.wait() synchronised the device"
            first = t[0]  # enqueued on the stream after wait(): sees the result
            return first.item()

    assert run_threads(2, body, timeout_s=80) == [3.0, 3.0]


@needs_cuda
def test_a_failed_reduction_leaves_the_cuda_tensor_untouched(address):
    def body(i):
        with join(address, 2) as comm:
            t = torch.arange(4096, dtype=torch.float32, device="cuda") + i
            before = t.clone()
            with pytest.raises(ferry.MismatchError):
                comm.all_reduce(t, tag=100 + i)  # different tags
            comm.update_topology()  # after a failure the master checks again only from the next vote
            with pytest.raises(ferry.MismatchError):
                comm.all_reduce_async(t, tag=200 + i).wait()
            comm.update_topology()
            torch.cuda.synchronize()
            assert torch.equal(t, before)
            comm.all_reduce(t, tag=7)
            return t[1].item()

    assert run_threads(2, body) == [3.0, 3.0]


@needs_cuda
def test_shared_state_syncs_cuda_tensors(address):
    def body(_):
        with join(address, 2) as comm:
            leader = comm.rank == 0
            weights = torch.full((10_000,), 7.0 if leader else 0.0, device="cuda")
            step = torch.tensor([3 if leader else 0], dtype=torch.int64)
            info = comm.sync_shared_state({"w": weights, "step": step}, revision=1,
                                          strategy="send_only" if leader else "enforce_popular")
            return comm.rank, info.changed, weights.sum().item(), int(step[0])  # .sum() after the copy back

    assert sorted(run_threads(2, body)) == [(0, (), 70_000.0, 3), (1, ("w", "step"), 70_000.0, 3)]


@needs_cuda
@pytest.mark.deadline(120)
@pytest.mark.parametrize("outer_device", [None, "cpu"])
def test_diloco_with_the_model_on_the_gpu_keeps_theta_identical(address, outer_device):
    from ferry.diloco import DiLoCo

    def body(i):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 1)).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        with make_peer(address, timeout=20) as comm:
            d = DiLoCo(comm, model, opt, sync_every=4, min_peers=2, overlap=True, outer_device=outer_device)
            d.join()
            g = torch.Generator(device="cuda").manual_seed(i)
            for _ in range(12):
                x = torch.randn(64, 32, device="cuda", generator=g)
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                d.step()
            d.finish()
            expected = torch.device(outer_device) if outer_device else torch.device("cuda", 0)
            assert d.outer_params[0].device == expected
            return torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])

    a, b = run_threads(2, body, timeout_s=110)
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))
