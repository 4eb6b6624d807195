"""all_reduce_async handles: out-of-order and cross-thread waits, exactly-once release,
references held until waited, and handles still in flight when the communicator closes."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest
import torch

import ferry
from ferry import _lib
from harness import child_env, join, run_threads


def test_handles_are_waited_out_of_order_and_from_other_threads(address):
    def body(_):
        with join(address, 2) as comm:
            r = comm.rank + 1
            arrays = [np.full(50_000, r * (k + 1), np.float64) for k in range(3)]
            tensor = torch.full((1000,), float(r))
            handles = [comm.all_reduce_async(a, op="sum", tag=k) for k, a in enumerate(arrays)]
            handles.append(comm.all_reduce_async(tensor, op="max", tag=3))
            infos = [None] * 4
            other = threading.Thread(target=lambda: infos.__setitem__(1, handles[1].wait()))
            other.start()
            infos[3] = handles[3].wait()
            infos[2] = handles[2].wait()
            infos[0] = handles[0].wait()
            other.join(20)
            assert all(isinstance(i, ferry.OpInfo) and i.world_size == 2 for i in infos)
            assert handles[3].output is tensor
            return [float(a[-1]) for a in arrays] + [tensor[0].item()]

    assert run_threads(2, body) == [[3.0, 6.0, 9.0, 2.0]] * 2


def test_done_wait_once_and_the_cached_result(address):
    issued = threading.Event()

    def body(i):
        with join(address, 2) as comm:
            data = np.ones(1024, np.float32)
            if i == 1:
                assert issued.wait(15)
                time.sleep(0.3)  # peer 0's op cannot finish before this peer issues its own
                comm.all_reduce(data, op="sum")
                return None
            handle = comm.all_reduce_async(data, op="sum")
            issued.set()
            assert not handle.done()
            assert "in flight" in repr(handle)
            first = handle.wait()
            assert handle.done() and "done" in repr(handle)
            assert handle.wait() is first  # later waits: the cached info, no second ferry_op_wait
            results = run_threads(3, lambda _: handle.wait())
            assert all(r is first for r in results)
            return float(data[0])

    assert run_threads(2, body)[0] == 2.0


def test_a_handle_keeps_its_tensors_alive_until_waited(address):
    def body(_):
        with join(address, 2) as comm:
            send = np.full(100_000, comm.rank + 1.0)
            out = torch.zeros(100_000, dtype=torch.float64)
            send_ref, out_ref = weakref.ref(send), weakref.ref(out)
            handle = comm.all_reduce_async(send, op="sum", out=out)
            del send, out
            gc.collect()
            assert send_ref() is not None and out_ref() is not None  # the library still borrows them
            handle.wait()
            gc.collect()
            assert send_ref() is None  # released once waited...
            return handle.output[12345].item()  # ...while the output stays reachable

    assert run_threads(2, body) == [3.0, 3.0]


def test_an_async_error_is_raised_by_every_wait(address):
    def body(i):
        with join(address, 2) as comm:
            handle = comm.all_reduce_async(np.ones(16, np.float32), tag=i)  # tags differ
            with pytest.raises(ferry.MismatchError) as first:
                handle.wait()
            with pytest.raises(ferry.MismatchError) as second:
                handle.wait()
            assert second.value is first.value
            assert handle.done() and "failed" in repr(handle)
            return True

    assert run_threads(2, body) == [True, True]


def test_close_with_ops_in_flight_releases_every_c_op_once_and_every_buffer(address, monkeypatch):
    """libferry 0.2 lets an op be waited after ferry_comm_destroy (tests/c/op_wait_after_destroy.c),
    so close() waits the ops it failed instead of leaking them."""
    lib = _lib.lib()
    issued, waited = [], []
    real_issue, real_wait = lib.ferry_allreduce_async, lib.ferry_op_wait

    def issue(*args):
        code = real_issue(*args)
        if code == 0:
            issued.append(ctypes.cast(args[-1]._obj, ctypes.c_void_p).value)  # args[-1] is byref(op)
        return code

    def wait(op, info):
        waited.append(ctypes.cast(op, ctypes.c_void_p).value)
        return real_wait(op, info)

    monkeypatch.setattr(lib, "ferry_allreduce_async", issue)
    monkeypatch.setattr(lib, "ferry_op_wait", wait)
    closed = threading.Event()

    def body(i):
        comm = join(address, 2)
        if i == 1:
            assert closed.wait(15)  # never issues until peer 0 closed: its ops stay in flight
            comm.close()
            return None
        send, out, dropped = np.ones(1 << 16, np.float32), torch.zeros(1 << 16), np.ones(8, np.float32)
        refs = [weakref.ref(x) for x in (send, out, dropped)]
        kept = comm.all_reduce_async(send, out=out)
        comm.all_reduce_async(dropped, tag=1)  # dropped at once: the communicator holds it
        del send, out, dropped
        assert not kept.done()
        start = time.monotonic()
        try:
            comm.close()
        finally:
            closed.set()
        assert time.monotonic() - start < 8  # ferry.h: the destroy blocks at most ~2 s
        with pytest.raises(ferry.InvalidUsageError, match="closed while this operation was in flight"):
            kept.wait()
        assert kept.done() and not comm._gate.unsettled()  # every op was settled
        del kept
        gc.collect()
        return [r() is None for r in refs]

    assert run_threads(2, body)[0] == [True, True, True]
    assert len(issued) == 2 and sorted(waited) == sorted(issued)  # each C op freed, exactly once


def test_close_after_an_unwaited_op_failed_reports_its_error(address):
    """The op fails (its peer left) and nobody waits it before close(): close() waits it first."""
    def body(i):
        comm = join(address, 2)
        if i == 1:
            comm.close()
            return None
        handle = comm.all_reduce_async(np.ones(1000), op="sum")
        deadline = time.monotonic() + 15
        while not handle.done():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        comm.close()
        with pytest.raises(ferry.PeerLostError):
            handle.wait()
        return True

    assert run_threads(2, body)[0] is True


def test_close_waits_for_a_wait_on_another_thread(address):
    def body(i):
        comm = join(address, 2)
        if i == 1:
            time.sleep(1.0)  # never issues; leaving fails peer 0's op
            comm.close()
            return None
        handle = comm.all_reduce_async(np.ones(1000), op="sum")
        ended = []

        def waiter():
            try:
                handle.wait()
            except ferry.FerryError as e:
                ended.append((time.monotonic(), type(e)))

        worker = threading.Thread(target=waiter)
        worker.start()
        time.sleep(0.2)  # the waiter is inside ferry_op_wait now
        comm.close()
        closed_at = time.monotonic()
        worker.join(10)
        assert ended and ended[0][0] <= closed_at
        return ended[0][1]

    assert run_threads(2, body)[0] is ferry.PeerLostError


EXIT_WITHOUT_CLOSING = """
import threading, numpy as np, ferry
m = ferry.Master("127.0.0.1:0").start()
cs = [ferry.Communicator(f"127.0.0.1:{m.port}", listen_host="127.0.0.1") for _ in range(2)]
def grow(c):
    c.connect(); c.wait_for_world(2, timeout=15)
ts = [threading.Thread(target=grow, args=(c,)) for c in cs]
[t.start() for t in ts]; [t.join(20) for t in ts]
h = cs[0].all_reduce_async(np.ones(1000))
print("exiting", flush=True)
"""


def test_exiting_without_closing_is_clean():
    """An atexit hook closes what is open while the tensors still exist (no crash at teardown)."""
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", EXIT_WITHOUT_CLOSING], env=child_env(), capture_output=True,
                              text=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, "exiting\n"), done.stderr[-2000:]


def test_close_waits_for_a_blocking_call_on_another_thread(address):
    """close() never destroys the handle under a running call: it waits for the call to end."""
    def body(i):
        comm = join(address, 2, timeout=0.8)
        if i == 1:
            time.sleep(2)  # lets peer 0's all-reduce time out
            comm.close()
            return None
        started = threading.Event()
        ended = []

        def blocked():
            started.set()
            try:
                comm.all_reduce(np.ones(4, np.float32))
            except ferry.FerryError as e:
                ended.append((time.monotonic(), type(e)))

        worker = threading.Thread(target=blocked)
        worker.start()
        assert started.wait(5)
        time.sleep(0.2)
        comm.close()
        closed_at = time.monotonic()
        worker.join(5)
        assert ended and ended[0][0] <= closed_at
        return ended[0][1]

    assert run_threads(2, body)[0] is ferry.TimeoutError
