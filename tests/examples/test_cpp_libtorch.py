"""The C++ DiLoCo example (examples/cpp), two peers: both end with the same weights. Skipped
(ctest: "Skipped") unless CMake found libtorch and built it (FERRY_DILOCO_CPP names it)."""

from __future__ import annotations

import os
from typing import List, Optional

import pytest

from example_run import WAIT_S, Run

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
