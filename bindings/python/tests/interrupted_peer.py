"""A peer in its own process that the test interrupts with SIGINT while it blocks (test_interrupt.py).

usage: interrupted_peer.py MASTER_ADDRESS MODE
  Prints "blocking" right before its blocking call, then, when a KeyboardInterrupt ends it,
  "interrupted MONOTONIC_TIME" (CLOCK_MONOTONIC, comparable with the test's), and goes on by MODE:
    allreduce        joins a group of 2, all_reduce;
    wait             joins a group of 2, all_reduce_async, then Handle.wait;
    update_topology  joins a group of 2, update_topology;
    connect          connect (to a group whose member never votes it in);
  then prints "closed BOOL", "after CLASS" (what a next all_reduce raised), "done", and exits 0.
    twice            as allreduce; then a new communicator's connect is interrupted the same
                     way; then prints "sleeping" and sleeps in plain Python until a third SIGINT
                     ends the process as Python's default handler does.
    uncaught         as allreduce, but nothing catches the KeyboardInterrupt.
"""

import sys
import time

import numpy as np

import ferry

PEER = dict(listen_host="127.0.0.1", timeout=60, progress_timeout=30, heartbeat_timeout=10,
            connections=2)


def interrupted(call) -> None:
    print("blocking", flush=True)
    try:
        call()
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
    else:
        print("returned", flush=True)


def main() -> int:
    address, mode = sys.argv[1], sys.argv[2]
    comm = ferry.Communicator(address, **PEER)
    data = np.ones(1024, np.float32)
    if mode == "connect":
        interrupted(comm.connect)
    else:
        comm.connect()
        comm.wait_for_world(2, timeout=30)
        if mode == "uncaught":
            print("blocking", flush=True)
            comm.all_reduce(data)
        elif mode in ("allreduce", "twice"):
            interrupted(lambda: comm.all_reduce(data))
        elif mode == "wait":
            handle = comm.all_reduce_async(data)
            interrupted(handle.wait)
        elif mode == "update_topology":
            interrupted(comm.update_topology)
    print("closed", comm.closed, flush=True)
    try:
        comm.all_reduce(data)
        print("after returned", flush=True)
    except ferry.FerryError as error:
        print("after", type(error).__name__, error, flush=True)
    comm.close()
    if mode == "twice":
        with ferry.Communicator(address, **PEER) as again:
            interrupted(again.connect)
        print("sleeping", flush=True)
        time.sleep(60)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
