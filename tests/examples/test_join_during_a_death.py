"""A newcomer waits while a member dies: every example admits it mid-reduction and ends identical."""

from __future__ import annotations

import signal
import time
from typing import List

import pytest

from example_run import Run, assert_identical_and_trained


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
