"""Fixtures and per-test deadlines (stdlib faulthandler: no pytest plugin needed).

Every test runs under a hard deadline: if it overruns, faulthandler dumps every
thread's stack and exits the process, so a hang fails the run instead of stalling it.
Mark a test with @pytest.mark.deadline(SECONDS) to change its deadline.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the package, from the source tree

import ferry  # noqa: E402

DEFAULT_DEADLINE_S = 60

# Hermetic runs: a secret in the caller's environment would change every master and peer.
for _variable in ("FERRY_SECRET_FILE", "FERRY_MASTER_ADDR", "FERRY_TLS_CERT_FILE", "FERRY_TLS_KEY_FILE",
                  "FERRY_TLS_CA_FILE"):
    os.environ.pop(_variable, None)


def pytest_configure(config):
    config.addinivalue_line("markers", "deadline(seconds): hard per-test time limit (default 60 s)")
    # The tests use the current API: an old call form (ferry.legacy) fails, unless a test
    # checks it under pytest.warns / pytest.deprecated_call.
    config.addinivalue_line("filterwarnings", r"error:.*a deprecated form of 0\.3:DeprecationWarning")
    # Fail at once, with the list of places tried, when libferry cannot be loaded.
    ferry.library_path()


@pytest.fixture(autouse=True)
def _deadline(request):
    marker = request.node.get_closest_marker("deadline")
    seconds = marker.args[0] if marker else DEFAULT_DEADLINE_S
    faulthandler.dump_traceback_later(seconds, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture
def master():
    """A started master on a free loopback port; yields it, closes it after the test."""
    m = ferry.Master("127.0.0.1:0")
    m.start()
    yield m
    m.close()


@pytest.fixture
def address(master):
    return f"127.0.0.1:{master.port}"


@pytest.fixture
def watched():
    """A started master with its HTTP endpoint on loopback; yields (master, base URL)."""
    m = ferry.Master("127.0.0.1:0", http="127.0.0.1:0")
    m.start()
    yield m, f"http://127.0.0.1:{m.http_port}/"
    m.close()
