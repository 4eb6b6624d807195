"""Ctrl-C: a blocking call on the main thread raises KeyboardInterrupt at once and closes the
communicator, and the other peers hear of it as of a peer that left (Communicator, "Ctrl-C").

A child process (interrupted_peer.py) blocks on a peer that never calls -- this test's own
communicator -- and gets SIGINT. Every peer has a 60 s deadline, so an interrupt that waited for
it fails here; the generous bounds below only turn a hang into a failure on a loaded machine.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Iterator, List, Optional, Tuple

import numpy as np
import pytest

import ferry
from harness import HERE, child_env, join, make_peer

# The promise is ~0.05 s; a loaded 2-core machine may hold the child off the CPU a while.
INTERRUPT_WITHIN_S = 1.0
# The survivors' view: well under the 60 s deadline they would otherwise wait.
SURVIVOR_WITHIN_S = 15.0


class InterruptedPeer:
    """interrupted_peer.py in a child process; its stdout read line by line on a thread."""

    def __init__(self, address: str, mode: str) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "interrupted_peer.py"), address, mode],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
        self.lines: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("")  # end of output

    def expect(self, prefix: str, timeout_s: float = 30.0) -> str:
        """The next line, which must start with `prefix`."""
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            line = f"<nothing within {timeout_s} s>"
        if not line.startswith(prefix):
            self.proc.kill()
            raise AssertionError(f"expected {prefix!r}, child printed {line!r}; stderr: {self.stderr()[-3000:]}")
        return line

    def interrupt_while_blocked(self) -> float:
        """Waits for 'blocking', lets the child enter its C call, sends SIGINT; returns how long
        the child took to print 'interrupted'."""
        self.expect("blocking")
        time.sleep(0.5)  # into the C call (a child that raises KeyboardInterrupt before it passes too)
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        line = self.expect("interrupted", timeout_s=10.0)
        return float(line.split()[1]) - sent

    def stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        return self.proc.stderr.read()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()


@contextlib.contextmanager
def survivor_and_child(address: str, mode: str, grow: bool = True) -> Iterator[Tuple[ferry.Communicator, InterruptedPeer]]:
    """This test's communicator (the group's first member, a 60 s deadline) and the child;
    with `grow`, both in a group of two. Both are closed after."""
    comm = make_peer(address, timeout=60)
    child: Optional[InterruptedPeer] = None
    try:
        comm.connect()
        child = InterruptedPeer(address, mode)
        if grow:
            comm.wait_for_world(2, timeout=30)
        yield comm, child
    finally:
        if child is not None:
            child.close()
        comm.close()


def expect_clean_exit(child: InterruptedPeer) -> List[str]:
    """The child's remaining lines, after it exited 0."""
    lines = [child.expect("closed True"), child.expect("after InvalidUsageError"), child.expect("done")]
    assert child.proc.wait(30) == 0, child.stderr()[-3000:]
    return lines


def assert_all_reduce_finds_the_peer_lost(comm: ferry.Communicator) -> None:
    start = time.monotonic()
    with pytest.raises(ferry.PeerLostError):
        comm.all_reduce(np.ones(16, np.float32))
    assert time.monotonic() - start < SURVIVOR_WITHIN_S


def survivor_update_topology(comm: ferry.Communicator) -> float:
    """The survivor votes the interrupted peer out; returns how long it took."""
    start = time.monotonic()
    for _ in range(3):
        try:
            comm.update_topology()
            break
        except ferry.PeerLostError:  # the peer left during the vote: vote again
            continue
    assert comm.world_size == 1
    return time.monotonic() - start


@pytest.mark.deadline(120)
@pytest.mark.parametrize("mode", ["allreduce", "wait"])
def test_ctrl_c_ends_an_all_reduce_and_the_other_peer_sees_it_lost(address, mode):
    with survivor_and_child(address, mode) as (comm, child):
        assert child.interrupt_while_blocked() < INTERRUPT_WITHIN_S
        after = expect_clean_exit(child)[1]
        assert "the communicator is closed" in after and "interrupted (KeyboardInterrupt)" in after
        assert_all_reduce_finds_the_peer_lost(comm)
        assert survivor_update_topology(comm) < SURVIVOR_WITHIN_S


@pytest.mark.deadline(120)
def test_ctrl_c_ends_an_update_topology_the_other_peer_never_joins(address):
    with survivor_and_child(address, "update_topology") as (comm, child):
        assert child.interrupt_while_blocked() < INTERRUPT_WITHIN_S
        expect_clean_exit(child)
        assert survivor_update_topology(comm) < SURVIVOR_WITHIN_S


@pytest.mark.deadline(120)
def test_ctrl_c_ends_a_connect_the_group_never_admits(address):
    # This test's peer is the group's only member, and it never votes the child in.
    with survivor_and_child(address, "connect", grow=False) as (comm, child):
        assert child.interrupt_while_blocked() < INTERRUPT_WITHIN_S
        expect_clean_exit(child)
        deadline = time.monotonic() + SURVIVOR_WITHIN_S
        while comm.peers_pending() != 0:  # the master forgot the newcomer that left
            assert time.monotonic() < deadline, "the interrupted newcomer still waits for admission"
            time.sleep(0.2)


@pytest.mark.deadline(150)
def test_a_second_ctrl_c_interrupts_again_and_a_third_ends_the_process(address):
    with survivor_and_child(address, "twice") as (comm, child):
        assert child.interrupt_while_blocked() < INTERRUPT_WITHIN_S
        for prefix in ("closed True", "after InvalidUsageError"):
            child.expect(prefix)
        assert survivor_update_topology(comm) < SURVIVOR_WITHIN_S
        # A new communicator's connect, interrupted while the first one may still be being freed.
        assert child.interrupt_while_blocked() < INTERRUPT_WITHIN_S
        child.expect("sleeping")
        child.proc.send_signal(signal.SIGINT)  # Python's own handler, untouched: the process ends by it
        assert child.proc.wait(30) == -signal.SIGINT


@pytest.mark.deadline(120)
def test_two_quick_ctrl_c_end_the_process_and_the_other_peer_sees_it_lost(address):
    with survivor_and_child(address, "uncaught") as (comm, child):
        child.expect("blocking")
        time.sleep(0.5)
        child.proc.send_signal(signal.SIGINT)
        time.sleep(0.005)  # the second lands while the first one's interrupt is being handled
        child.proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        assert child.proc.wait(30) == -signal.SIGINT  # uncaught KeyboardInterrupt, not a hang or a crash
        assert time.monotonic() - sent < 10
        assert "KeyboardInterrupt" in child.stderr()
        assert_all_reduce_finds_the_peer_lost(comm)



@pytest.mark.deadline(90)
def test_a_signal_handler_that_does_not_raise_runs_during_the_call_and_the_call_goes_on(address):
    """In this process: the main thread's all-reduce waits for a slow peer (a thread) when
    SIGINT arrives; a handler that only counts runs at once, and the all-reduce completes."""
    seen: List[float] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(time.monotonic()))

    def slow_peer() -> None:
        with join(address, 2) as comm:
            time.sleep(2.0)
            comm.all_reduce(np.ones(16, np.float32))

    thread = threading.Thread(target=slow_peer, daemon=True)
    try:
        thread.start()
        with join(address, 2) as comm:
            data = np.ones(16, np.float32)
            threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
            comm.all_reduce(data)
            returned = time.monotonic()
            assert float(data[0]) == 2.0 and not comm.closed
        assert len(seen) == 1
        assert seen[0] < returned - 0.5, "the handler ran only once the call had returned"
    finally:
        signal.signal(signal.SIGINT, previous)
        thread.join(30)
