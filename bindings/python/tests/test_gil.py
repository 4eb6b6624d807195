"""Blocking calls release the GIL (ctypes.CDLL drops it around every foreign call)."""

from __future__ import annotations

import threading
import time

import numpy as np

from harness import join, run_threads


def test_other_python_threads_run_while_an_all_reduce_blocks(address):
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    def body(i):
        with join(address, 2) as comm:
            data = np.ones(1024, np.float32)
            if i == 1:
                time.sleep(1.0)  # the slow peer: peer 0 waits inside the C call meanwhile
                comm.all_reduce(data, op="sum")
                return None
            counting = threading.Thread(target=count)
            counting.start()
            try:
                before, start = counter[0], time.monotonic()
                comm.all_reduce(data, op="sum")
                return time.monotonic() - start, counter[0] - before, float(data[0])
            finally:
                stop.set()
                counting.join(5)

    blocked_s, counted, value = run_threads(2, body)[0]
    assert value == 2.0
    assert blocked_s > 0.7  # the call really waited for the slow peer...
    assert counted > 10_000  # ...and the counting thread kept running all along
