"""The examples are tests: each runs with tiny settings as two peer processes against a real
master, and both must end with bit-identical weights and a trained model."""

from __future__ import annotations

from typing import List

import pytest

from example_run import Run, assert_identical_and_trained


@pytest.mark.parametrize("script,extra", [
    ("diloco.py", []),
    ("diloco.py", ["--quant", "u8"]),
    ("diloco.py", ["--mode", "ddp"]),
    ("diloco.py", ["--task", "teacher"]),
    ("diloco.py", ["--task", "text"]),
    ("async_diloco.py", []),
    ("streaming_diloco.py", ["--fragments", "2", "--inner-steps", "4"]),
    ("diloco.py", ["--inner-time", "0.1", "--step-time", "0.01"]),
    ("diloco.py", ["--sparse", "default"]),
], ids=["diloco", "diloco-u8", "ddp", "diloco-teacher", "diloco-text", "async", "streaming", "timeboxed",
        "sparseloco"])
def test_two_peers_end_bit_identical(run: Run, script: str, extra: List[str]) -> None:
    for i in range(2):
        run.peer(script, f"p{i}", "--min-peers", "2", *extra, shard=i)
    assert_identical_and_trained(run.finish(["p0", "p1"]), world=2)
    assert "step   2 |" in run.output("p0")
