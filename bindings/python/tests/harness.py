"""Shared helpers for the binding tests: peers as threads (with deadlines) and as processes."""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple

import ferry

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent  # bindings/python
REPO_ROOT = PACKAGE_ROOT.parent.parent

# Short deadlines so a broken test fails in seconds, never hangs the suite.
PEER_DEFAULTS = dict(listen_host="127.0.0.1", timeout=10, progress_timeout=5,
                     heartbeat_timeout=3, connections=2)


def make_peer(address: str, **overrides: Any) -> ferry.Communicator:
    """A Communicator with the tests' deadlines, not yet connected."""
    return ferry.Communicator(address, **{**PEER_DEFAULTS, **overrides})


def join(address: str, world: int, **overrides: Any) -> ferry.Communicator:
    """connect() then grow the group to `world` peers (every peer of the group must do the same)."""
    comm = make_peer(address, **overrides)
    comm.connect()
    comm.wait_for_world(world, timeout=15)
    return comm


class PeerFailed(AssertionError):
    pass


def run_threads(n: int, body: Callable[[int], Any], timeout_s: float = 30.0) -> List[Any]:
    """Runs body(0..n-1) on n threads; returns their results, or raises the first failure.

    Every thread must end within timeout_s (the C calls are bounded by the peers' deadlines).
    """
    results: List[Any] = [None] * n
    errors: List[Optional[BaseException]] = [None] * n

    def run(i: int) -> None:
        try:
            results[i] = body(i)
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            errors[i] = e

    threads = [threading.Thread(target=run, args=(i,), name=f"peer-{i}", daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        raise PeerFailed(f"threads still running after {timeout_s} s: {stuck}")
    for i, e in enumerate(errors):
        if e is not None:
            raise PeerFailed(f"peer {i} failed: {type(e).__name__}: {e}") from e
    return results


def run_with_own_master(n: int, body: Callable[[str, int], Any]) -> List[Any]:
    """run_threads(n) of body(address, i) against a master of their own (closed after)."""
    master = ferry.Master("127.0.0.1:0").start()
    try:
        return run_threads(n, lambda i: body(f"127.0.0.1:{master.port}", i))
    finally:
        master.close()


def reap(child: "subprocess.Popen") -> None:
    """Ends a child process for sure (kill if it still runs) and closes its pipes."""
    if child.poll() is None:
        child.kill()
    child.wait(10)
    for pipe in (child.stdout, child.stderr):
        if pipe is not None:
            pipe.close()


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE_ROOT), env.get("PYTHONPATH", "")])
    env.setdefault("FERRY_LIBRARY", ferry.library_path())
    return env


class PeerProcess:
    """tests/peer_process.py in a child process: joins, grows to `world`, prints 'ready RANK',
    then follows its `mode` (see that file). Killed for sure on close()."""

    def __init__(self, address: str, world: int, mode: str = "sleep") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "peer_process.py"), address, str(world), mode],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())

    def wait_ready(self, timeout_s: float = 20.0) -> int:
        """Blocks until the child printed 'ready RANK'; returns its rank."""
        box: List[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        line = box[0] if box else ""
        if not line.startswith("ready"):
            self.kill()
            raise PeerFailed(f"peer process not ready: {line!r} {self.proc.stderr.read()[-2000:]}")
        self.peer_id = int(line.split()[2])
        return int(line.split()[1])

    def finish(self, timeout_s: float = 20.0) -> str:
        """Waits for the child to exit on its own; returns the rest of its stdout."""
        self.proc.wait(timeout_s)
        return self.proc.stdout.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL: no goodbye to the master, sockets just close
        self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


_loggers = itertools.count()


class _Lines(logging.Handler):
    def __init__(self, lines: List[str]) -> None:
        super().__init__(logging.DEBUG)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def collecting_logger(parent: str = "ferry.diloco") -> Tuple[logging.Logger, List[str]]:
    """A fresh child of ``parent`` at INFO and the list its records' messages go to: one peer's
    membership events, apart from those of other peers in this process."""
    logger = logging.getLogger(f"{parent}.test{next(_loggers)}")
    logger.setLevel(logging.INFO)
    lines: List[str] = []
    logger.addHandler(_Lines(lines))
    return logger, lines
