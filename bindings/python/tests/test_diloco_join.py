"""DiLoCo.join() short of min_peers: it says whom it waits for within seconds, and gives up at
its deadline with an error naming min_peers and the count reached (issue 42, item 2)."""

from __future__ import annotations

import datetime
import logging
import time

import pytest

import ferry
from diloco_peer import PEER_ARGS, toy


def test_join_short_of_min_peers_says_so_then_times_out(address, caplog):
    """The notices are warnings of the "ferry.diloco" logger; the deadline may be a timedelta."""
    with ferry.Communicator(address, **PEER_ARGS) as comm:
        diloco = toy(comm, min_peers=2)
        began = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="ferry"), pytest.raises(ferry.TimeoutError) as info:
            diloco.join(timeout=datetime.timedelta(seconds=7))
        waited = time.monotonic() - began
    assert 6 < waited < 15, waited
    assert "min_peers=2" in str(info.value) and "has 1 peer" in str(info.value), info.value
    notices = [r for r in caplog.records if "waiting for min_peers=2: the group has 1" in r.getMessage()]
    assert notices, caplog.records
    assert {(r.name, r.levelno) for r in notices} == {("ferry.diloco", logging.WARNING)}
