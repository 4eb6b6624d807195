"""The `run` fixture of the example tests (example_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from example_run import Run


@pytest.fixture
def run(tmp_path: Path):
    r = Run(tmp_path)
    yield r
    r.close()
