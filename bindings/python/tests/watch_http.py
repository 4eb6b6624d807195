"""What the tests of a watched run share (test_watch*.py): the HTTP endpoint's pages, and waiting
for what they show. The `watched` fixture (a master with that endpoint) is in conftest.py."""

from __future__ import annotations

import json
import socket
import time
import urllib.request


def get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


def status(base: str) -> dict:
    return json.loads(get(base + "status"))


def wait_for(what: str, predicate, timeout_s: float = 30.0, every_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (OSError, ValueError) as error:  # not serving yet, or a torn read
            last = error
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last: {last!r}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

