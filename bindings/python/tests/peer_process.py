"""A peer in its own process, for the tests where a peer must die (SIGKILL) or outlive a thread.

usage: peer_process.py MASTER_ADDRESS WORLD MODE
  joins, grows its group to WORLD peers, prints "ready RANK", then by MODE:
    sleep      sleeps (at most 60 s) until the test kills it;
    allreduce  sum-all-reduces ones(1024) f32 once, prints "result VALUE", and exits;
    hold       syncs holder_weights() as shared state at revision 1 (after a retryable
               failure: update_topology and again), prints "synced", then sleeps like sleep.
    silenced   stops itself (SIGSTOP) until the test resumes it, then calls update_topology
               and prints "raised CLASS MESSAGE" (or "returned").
    loop       sum-all-reduces ones(4096) f32 over and over for at most 120 s, admitting
               newcomers (update_topology when peers are pending) and carrying on after a
               retryable failure (a lost peer) in the ring of the survivors.
"ready" is followed by the rank and the peer id: "ready RANK ID".
"""

import os
import signal
import sys
import time

import numpy as np

import ferry

HOLDER_ELEMENTS = 24 << 20  # 96 MiB of f32


def holder_weights() -> np.ndarray:
    """The same bytes in every holder: normal values with bf16's precision, so zstd has work
    to do (a compressed fetch takes long enough to be interrupted)."""
    weights = np.random.default_rng(7).standard_normal(HOLDER_ELEMENTS, dtype=np.float32)
    weights.view(np.uint32)[:] &= 0xFFFF0000
    return weights


def main() -> int:
    address, world, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    comm = ferry.Communicator(address, listen_host="127.0.0.1", timeout=10, progress_timeout=5,
                              heartbeat_timeout=3, connections=2)
    comm.connect()
    comm.wait_for_world(world, timeout=15)
    print("ready", comm.rank, comm.peer_id, flush=True)
    if mode == "hold":
        state = {"weights": holder_weights()}
        while True:
            try:
                comm.sync_shared_state(state, revision=1)
                break
            except ferry.FerryError as error:
                if not error.is_retryable:
                    raise
                comm.update_topology()
        print("synced", flush=True)
    if mode in ("sleep", "hold"):
        time.sleep(60)
    elif mode == "silenced":
        os.kill(os.getpid(), signal.SIGSTOP)
        try:
            comm.update_topology()
            print("returned", flush=True)
        except ferry.FerryError as error:
            print("raised", type(error).__name__, error, flush=True)
    elif mode == "loop":
        data = np.ones(4096, np.float32)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            # Every member makes the same calls in the same order: a newcomer's first call
            # after its admission is the all-reduce the others make after admitting it.
            try:
                comm.all_reduce(data, op="avg")
                if comm.peers_pending():
                    comm.update_topology()
            except ferry.FerryError as error:
                if not error.is_retryable:
                    raise
                comm.update_topology()
            time.sleep(0.01)
    elif mode == "allreduce":
        data = np.ones(1024, np.float32)
        comm.all_reduce(data, op="sum")
        print("result", float(data[0]), flush=True)
    comm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
