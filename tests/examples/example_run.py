"""What the example tests share (test_*.py here): peer processes of one example against an
embedded master, and the check that a run ended bit-identical and trained.

Run by ctest (label `examples`, one test per file) with Debian's /usr/bin/python3 and
FERRY_LIBRARY pointing at the build's libferry; FERRY_DILOCO_CPP names the C++ example when
libtorch was found.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "python"
sys.path.insert(0, str(REPO / "bindings" / "python"))

import ferry  # noqa: E402

os.environ.pop("FERRY_SECRET_FILE", None)  # hermetic: a caller's secret would change every master and peer

# Small and fast: a few outer steps of a few inner steps; short deadlines so a fault fails fast.
TINY = ["--outer-steps", "3", "--inner-steps", "5", "--hidden", "32", "--inner-lr", "0.01", "--listen-host", "127.0.0.1",
        "--timeout", "20", "--heartbeat-timeout", "3"]
WAIT_S = 90


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO / "bindings" / "python"), str(EXAMPLES)])
    e.setdefault("FERRY_LIBRARY", ferry.library_path())
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    return e


class Run:
    """Peer processes of one example against an embedded master; killed for sure at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.master = ferry.Master("127.0.0.1:0").start()
        self.address = f"127.0.0.1:{self.master.port}"
        self.procs: List[subprocess.Popen] = []

    def spawn(self, argv: List[str], name: str) -> subprocess.Popen:
        out = open(self.tmp / f"{name}.out", "w")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env(), cwd=REPO)
        proc.name = name  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def peer(self, script: str, name: str, *extra: str, shard: int = 0, shards: int = 2) -> subprocess.Popen:
        return self.spawn([sys.executable, str(EXAMPLES / script), "--master", self.address, "--name", name,
                           "--shard", str(shard), "--num-shards", str(shards),
                           "--result", str(self.tmp / f"{name}.json"), *TINY, *extra], name)

    def output(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text()

    def wait_for_line(self, name: str, text: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while text not in self.output(name):
            assert time.monotonic() < deadline, f"{name} never printed {text!r}:\n{self.output(name)}"
            time.sleep(0.05)

    def finish(self, names: List[str]) -> List[dict]:
        """Waits for these peers; each must exit 0; returns their JSON summaries."""
        results = []
        for proc in self.procs:
            if proc.name in names:  # type: ignore[attr-defined]
                rc = proc.wait(timeout=WAIT_S)
                assert rc == 0, f"{proc.name} exited {rc}:\n{self.output(proc.name)}"  # type: ignore[attr-defined]
        for name in names:
            results.append(json.loads((self.tmp / f"{name}.json").read_text()))
        return results

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.master.close()


def assert_identical_and_trained(results: List[dict], world: int) -> None:
    hashes = {r["weights_hash"] for r in results}
    assert len(hashes) == 1, f"weights differ between peers: {results}"
    for r in results:
        assert r["world"] == world
        # An untrained model scores about ln(classes): 2.30 for 10 digits, 4.56 for text's 96 characters.
        assert r["eval_loss"] < math.log(96 if r["task"] == "text" else 10) - 0.1, r
        assert r["bytes_sent"] > 0
