"""The Python versions the package's metadata claims are the ones it runs on.

pyproject.toml says `requires-python` and lists each supported minor version as a
classifier; this runs a whole small run (an embedded master, two peers, an all-gather
of bytes: no torch or NumPy needed) under each listed version that this machine has
(pyenv's or one on PATH). A listed version that is not here is skipped, not passed.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

import ferry

PACKAGE_ROOT = Path(__file__).resolve().parent.parent

RUN = """
import threading, ferry
results, errors = {}, []
def peer(i, address):
    try:
        with ferry.Communicator(address, listen_host="127.0.0.1") as c:
            c.connect()
            c.wait_for_world(2, timeout=30)
            results[i] = c.all_gather(bytes([i + 1]) * (i + 1))
    except BaseException as e:
        errors.append(repr(e))
with ferry.Master("127.0.0.1:0") as m:
    threads = [threading.Thread(target=peer, args=(i, f"127.0.0.1:{m.port}")) for i in range(2)]
    for t in threads: t.start()
    for t in threads: t.join(60)
assert not errors, errors
assert results[0] == results[1] and sorted(results[0]) == [b"\\x01", b"\\x02\\x02"], results
print("ok", ferry.__version__)
"""


def metadata() -> Tuple[str, List[Tuple[int, int]]]:
    project = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())["project"]
    listed = [tuple(int(x) for x in m.groups()) for c in project["classifiers"]
              if (m := re.fullmatch(r"Programming Language :: Python :: (\d+)\.(\d+)", c))]
    return project["requires-python"], sorted(listed)


def interpreter(version: Tuple[int, int]) -> Optional[str]:
    name = f"python{version[0]}.{version[1]}"
    if (sys.version_info[0], sys.version_info[1]) == version:
        return sys.executable
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(pyenv, "versions", f"{version[0]}.{version[1]}.*", "bin", name)))
    return found[-1] if found else shutil.which(name)


def test_the_classifiers_list_every_version_from_requires_python_on():
    requires, listed = metadata()
    low = re.fullmatch(r">=(\d+)\.(\d+)", requires)
    assert low, f"requires-python is {requires!r}: a lower bound only, '>=X.Y'"
    assert listed, "no 'Programming Language :: Python :: X.Y' classifier"
    assert listed[0] == (int(low[1]), int(low[2])), (requires, listed)
    assert listed == [(3, m) for m in range(listed[0][1], listed[-1][1] + 1)], f"a gap in {listed}"
    assert (sys.version_info[0], sys.version_info[1]) in listed, "the tests' own interpreter is not listed"


@pytest.mark.deadline(300)
@pytest.mark.parametrize("version", metadata()[1], ids=[f"{v[0]}.{v[1]}" for v in metadata()[1]])
def test_a_run_under_each_listed_version(version):
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version[0]}.{version[1]} on this machine")
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_ROOT), FERRY_LIBRARY=ferry.library_path())
    done = subprocess.run([python, "-c", RUN], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{python}:\n{done.stdout}{done.stderr}"
    assert done.stdout.split() == ["ok", ferry.__version__]
