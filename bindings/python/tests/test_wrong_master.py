"""A wrong master address (issue 42, item 3): a refused one is named in a warning at the first
failure and in the error within seconds, not after master_connect_timeout_ms's minute; a name
that does not resolve at once."""

from __future__ import annotations

import socket
import time

import pytest

import ferry
from harness import make_peer


def free_port() -> int:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("host", ["127.0.0.1", "no-such-master.invalid"])
def test_a_wrong_master_address_is_named_within_seconds(host, capfd):
    address = f"{host}:{free_port()}"
    with make_peer(address, timeout=3) as comm:
        began = time.monotonic()
        with pytest.raises(ferry.ConnectError) as info:
            comm.connect()
        took = time.monotonic() - began
    assert took < 15, took
    assert address in str(info.value), info.value
    if host == "127.0.0.1":
        assert "refused 10 times" in str(info.value), info.value
        warned = capfd.readouterr().err
        assert f"[ferry warning] master {address}: " in warned and "dialing it again" in warned, warned
    else:
        assert "check the master's host name" in str(info.value), info.value
