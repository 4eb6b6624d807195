#!/usr/bin/env python3
"""What an automatic vote at every collective boundary would cost (issue 42, item 1): the
members of a loopback run time, per call, peers_pending(), a vote that admits nobody, a vote
that admits one newcomer, and a small all_reduce for scale. Prints one line per measurement
(median and max over --rounds). docs/design.md, "Joining", quotes its numbers.

    FERRY_LIBRARY=build/capi/libferry.so /usr/bin/python3 tools/admission-cost/admission_cost.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bindings" / "python"))
import ferry  # noqa: E402

PEER = dict(listen_host="127.0.0.1", timeout=20, connections=2)


def together(comms, call, values=None):
    """Runs call(comm) on every member at once (votes and queries are collective); the
    seconds the slowest took. `values`, if given, gets each member's result."""
    took = [0.0] * len(comms)
    errors = []
    if values is not None:
        values[:] = [None] * len(comms)

    def run(i, comm):
        began = time.perf_counter()
        try:
            result = call(comm)
            if values is not None:
                values[i] = result
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        took[i] = time.perf_counter() - began

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(comms)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    return max(took)


def report(name, samples):
    ms = [s * 1000 for s in samples]
    print(f"{name:44s} median {statistics.median(ms):9.2f} ms   max {max(ms):9.2f} ms   ({len(ms)} rounds)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with ferry.Master("127.0.0.1:0") as master:
        address = f"127.0.0.1:{master.port}"
        members = [ferry.Communicator(address, **PEER) for _ in range(args.members)]
        # Each connects, then votes for the world: a later one is pending until the earlier ones' vote.
        together(members, lambda c: (c.connect(), c.wait_for_world(args.members, timeout=30)))
        data = np.ones(1024, np.float32)
        allreduce, pending, idle_vote, admitting = [], [], [], []
        for _ in range(args.rounds):
            allreduce.append(together(members, lambda c: c.all_reduce(data)))
            pending.append(together(members, lambda c: c.peers_pending()))
            idle_vote.append(together(members, lambda c: c.update_topology()))
            newcomer = ferry.Communicator(address, **PEER)
            joining = threading.Thread(target=newcomer.connect)
            joining.start()
            counts = [0]
            while not counts[0]:  # until the master has its hello
                together(members, lambda c: c.peers_pending(), counts)
                time.sleep(0.005)
            admitting.append(together(members, lambda c: c.update_topology()))
            joining.join(30)
            # Back to the same world: the newcomer leaves, the others re-form without it.
            newcomer.close()
            together(members, lambda c: c.update_topology())
        report("all_reduce of 1024 f32", allreduce)
        report("peers_pending() (nobody waits)", pending)
        report("update_topology() admitting nobody", idle_vote)
        report("update_topology() admitting one newcomer", admitting)
        for m in members:
            m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
