"""The single-process baseline the examples compare with learns on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from example_run import EXAMPLES, TINY, WAIT_S, env


def test_single_process_baseline_learns(tmp_path: Path) -> None:
    result = tmp_path / "single.json"
    subprocess.run([sys.executable, str(EXAMPLES / "diloco.py"), "--mode", "single", "--num-shards", "2",
                    "--result", str(result), *TINY], env=env(), check=True, timeout=WAIT_S, capture_output=True)
    assert json.loads(result.read_text())["eval_loss"] < 2.0
