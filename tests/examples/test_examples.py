"""The examples are tests: each runs with tiny settings as real peer processes against a real
master, and the surviving peers must end with bit-identical weights (and a trained model).

Run by ctest (label `examples`) with Debian's /usr/bin/python3 and FERRY_LIBRARY pointing at
the build's libferry; FERRY_DILOCO_CPP names the C++ example when libtorch was found.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "python"
sys.path.insert(0, str(REPO / "bindings" / "python"))

import ferry  # noqa: E402

os.environ.pop("FERRY_SECRET_FILE", None)  # hermetic: a caller's secret would change every master and peer

# Small and fast: a few outer steps of a few inner steps; short deadlines so a fault fails fast.
TINY = ["--outer-steps", "3", "--inner-steps", "5", "--hidden", "32", "--inner-lr", "0.01", "--listen-host", "127.0.0.1",
        "--timeout-ms", "20000", "--heartbeat-timeout-ms", "3000"]
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


@pytest.fixture
def run(tmp_path: Path):
    r = Run(tmp_path)
    yield r
    r.close()


def assert_identical_and_trained(results: List[dict], world: int) -> None:
    hashes = {r["weights_hash"] for r in results}
    assert len(hashes) == 1, f"weights differ between peers: {results}"
    for r in results:
        assert r["world"] == world
        # An untrained model scores about ln(classes): 2.30 for 10 digits, 4.56 for text's 96 characters.
        assert r["eval_loss"] < math.log(96 if r["task"] == "text" else 10) - 0.1, r
        assert r["bytes_sent"] > 0


@pytest.mark.parametrize("script,extra", [
    ("diloco.py", []),
    ("diloco.py", ["--quant", "u8"]),
    ("diloco.py", ["--mode", "ddp"]),
    ("diloco.py", ["--task", "teacher"]),
    ("diloco.py", ["--task", "text"]),
    ("async_diloco.py", []),
    ("streaming_diloco.py", ["--fragments", "2", "--inner-steps", "4"]),
], ids=["diloco", "diloco-u8", "ddp", "diloco-teacher", "diloco-text", "async", "streaming"])
def test_two_peers_end_bit_identical(run: Run, script: str, extra: List[str]) -> None:
    for i in range(2):
        run.peer(script, f"p{i}", "--min-peers", "2", *extra, shard=i)
    assert_identical_and_trained(run.finish(["p0", "p1"]), world=2)
    assert "step   2 |" in run.output("p0")


def test_survives_a_join_and_a_kill(run: Run) -> None:
    """Three peers start; a fourth joins mid-run and gets the outer state; one is SIGKILLed;
    the three survivors finish with the same weights."""
    longer = ["--outer-steps", "24", "--inner-steps", "10", "--pace", "0.25"]
    for i in range(3):
        run.peer("diloco.py", f"p{i}", "--min-peers", "3", *longer, shard=i, shards=4)
    gate = run.tmp / "join-now"
    run.peer("diloco.py", "late", *longer, "--join-when-exists", str(gate), shard=3, shards=4)  # warm, waiting
    run.wait_for_line("p0", "step   1 |")
    gate.touch()
    run.wait_for_line("late", "joined at step")
    victim = next(p for p in run.procs if p.name == "p2")  # type: ignore[attr-defined]
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=WAIT_S)
    results = run.finish(["p0", "p1", "late"])
    assert_identical_and_trained(results, world=3)
    assert "world 3 -> 4" in run.output("p0") and "world 4 -> 3" in run.output("p0")


def test_single_process_baseline_learns(tmp_path: Path) -> None:
    result = tmp_path / "single.json"
    subprocess.run([sys.executable, str(EXAMPLES / "diloco.py"), "--mode", "single", "--num-shards", "2",
                    "--result", str(result), *TINY], env=env(), check=True, timeout=WAIT_S, capture_output=True)
    assert json.loads(result.read_text())["eval_loss"] < 2.0


CPP = os.environ.get("FERRY_DILOCO_CPP")


@pytest.mark.skipif(not CPP, reason="the C++ example is built only when CMake finds libtorch")
def test_cpp_libtorch_two_peers_end_bit_identical(run: Run) -> None:
    assert CPP is not None
    for i in range(2):
        run.spawn([CPP, "--master", run.address, "--peers", "2", "--rank-seed", str(i), "--outer-steps", "3",
                   "--inner-steps", "4"], f"cpp{i}")
    hashes: List[Optional[str]] = []
    for proc in list(run.procs):
        assert proc.wait(timeout=WAIT_S) == 0, run.output(proc.name)  # type: ignore[attr-defined]
        lines = [line for line in run.output(proc.name).splitlines() if "final" in line]  # type: ignore
        assert lines, run.output(proc.name)  # type: ignore[attr-defined]
        hashes.append(lines[-1].split("weights ")[-1])
    assert len(set(hashes)) == 1, hashes


@pytest.mark.parametrize("script,extra", [
    ("diloco.py", []),
    ("async_diloco.py", []),
    ("streaming_diloco.py", ["--fragments", "2"]),
], ids=["diloco", "async", "streaming"])
def test_join_during_a_death(run: Run, script: str, extra: List[str]) -> None:
    """A peer dies while a newcomer waits: the survivors' recovery vote admits the newcomer
    in the middle of a reduction (it joins it with weight 0, elastic.py); all end identical."""
    longer = ["--outer-steps", "12", "--inner-steps", "10", "--pace", "0.25", *extra]
    for i in range(3):
        run.peer(script, f"p{i}", "--min-peers", "3", *longer, shard=i, shards=4)
    gate = run.tmp / "join-now"
    run.peer(script, "late", *longer, "--join-when-exists", str(gate), shard=3, shards=4)
    run.wait_for_line("p0", "step   2 |")
    victim = next(p for p in run.procs if p.name == "p2")  # type: ignore[attr-defined]
    victim.send_signal(signal.SIGSTOP)  # silent: its death is noticed at the next reduction
    gate.touch()
    time.sleep(0.5)  # the newcomer is pending before the heartbeat deadline passes
    victim.send_signal(signal.SIGKILL)
    results = run.finish(["p0", "p1", "late"])
    assert_identical_and_trained(results, world=3)
    assert "joined at step" in run.output("late")
