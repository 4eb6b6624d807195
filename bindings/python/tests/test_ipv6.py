"""IPv6: a master at [::1] and peers on the library's default listener ("::", both families)."""

from __future__ import annotations

import numpy as np

import ferry
from harness import join, run_threads


def test_a_master_at_ipv6_loopback_and_default_listeners_make_one_ring():
    """Found on main: peers listened on 0.0.0.0 while advertised at ::1, and two of three were kicked."""
    master = ferry.Master("[::1]:0")
    master.start()
    try:
        address = f"[::1]:{master.port}"

        def body(i):
            # listen_host=None: the library's default, dual-stack.
            with join(address, 3, listen_host=None) as comm:
                data = np.array([1.0 / (k + 1 + 7 * i) for k in range(4096)], dtype=np.float64)
                comm.all_reduce(data, op="sum")
                return comm.ring(), data.tobytes()

        results = run_threads(3, body)
        assert len(results[0][0]) == 3
        for ring, data in results:
            assert ring == results[0][0]
            assert data == results[0][1]
    finally:
        master.close()
