"""A run survives a newcomer and a SIGKILL: the survivors end bit-identical and trained."""

from __future__ import annotations

import signal

from example_run import WAIT_S, Run, assert_identical_and_trained


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
