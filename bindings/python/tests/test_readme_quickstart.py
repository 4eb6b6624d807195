"""The top-level README's Python quickstarts, run exactly as printed, so they cannot rot.

Each block is the fenced ```python block after its marker comment in README.md
(`<!-- quickstart: all-reduce -->`, `<!-- quickstart: diloco -->`). The all-reduce block
runs as the README says (its own master, two peers in threads; cwd the repository's
root, PYTHONPATH=bindings/python) and must print what its print line's comment says.
The DiLoCo block is one peer's train.py: two copies run as processes against a master
started here (an embedded one on a free port, not the README's ferry-master on 48148),
through $FERRY_MASTER_ADDR as the README's commands do, and must end with the same weights. This interpreter runs them (run_tests.sh: Debian's /usr/bin/python3),
and $FERRY_LIBRARY, set by run_tests.sh, keeps them on the library under test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ferry

REPO = Path(__file__).resolve().parents[3]
README = REPO / "README.md"


def readme_block(name: str) -> str:
    """The ```python block after `<!-- quickstart: NAME -->` in README.md."""
    text = README.read_text()
    marker = f"<!-- quickstart: {name} -->"
    assert text.count(marker) == 1, f"README.md must hold {marker} exactly once"
    match = re.compile(r"\s*```python\n(.*?)^```$", re.S | re.M).match(text, text.index(marker) + len(marker))
    assert match, f"README.md: no ```python block right after {marker}"
    return match.group(1)


def readme_commands(name: str) -> str:
    """The ```sh block after the ```python block of `<!-- quickstart: NAME -->`."""
    text = README.read_text()
    start = text.index(f"<!-- quickstart: {name} -->")
    match = re.compile(r"^```sh\n(.*?)^```$", re.S | re.M).search(text, start)
    assert match and "<!--" not in text[start + 4:match.start()], f"README.md: no ```sh block for {name}"
    return match.group(1)


def readme_env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": "bindings/python", **extra}


@pytest.mark.deadline(120)
def test_the_all_reduce_quickstart_prints_what_it_says():
    pytest.importorskip("torch")
    code = readme_block("all-reduce")
    printed = [line for line in code.splitlines() if "print(" in line]
    assert len(printed) == 1 and "# " in printed[0], "the quickstart prints one line, its result in a comment"
    expected = printed[0].split("# ", 1)[1].strip()
    assert expected == "[[1.5, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]"  # the average of 1 and 2, on both peers
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=readme_env(), capture_output=True,
                         text=True, timeout=90)
    assert run.returncode == 0, run.stderr
    assert run.stdout == expected + "\n"


@pytest.mark.deadline(180)
def test_the_diloco_quickstart_trains_two_peers_to_the_same_weights(tmp_path):
    pytest.importorskip("torch")
    # The commands the README gives: a master, then two peers that find it through the environment.
    commands = readme_commands("diloco").splitlines()
    assert len(commands) == 3 and "ferry-master --listen 127.0.0.1:48148" in commands[0], commands
    for line in commands[1:]:
        assert line.startswith("FERRY_MASTER_ADDR=127.0.0.1:48148 PYTHONPATH=bindings/python ") and "train.py" in line
    script = tmp_path / "train.py"
    script.write_text(readme_block("diloco"))
    with ferry.Master("127.0.0.1:0") as master:
        env = readme_env(FERRY_MASTER_ADDR=f"127.0.0.1:{master.port}")
        peers = [subprocess.Popen([sys.executable, str(script)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        try:
            outputs = [peer.communicate(timeout=150) for peer in peers]
        finally:
            for peer in peers:
                peer.kill()
    for peer, (out, err) in zip(peers, outputs):
        assert peer.returncode == 0, err
    lines = [out.strip() for out, _ in outputs]
    pattern = re.compile(r"outer step 5: loss \d+\.\d{3}, weights (-?\d+\.\d{6})")
    weights = [pattern.fullmatch(line) for line in lines]
    assert all(weights), lines
    assert weights[0].group(1) == weights[1].group(1), lines  # bit-identical outer weights on both peers
