"""The dashboard of a watched run in headless Chromium (tests/dashboard/check_dashboard.py):
a join and a SIGKILL show on the page. Skipped where Chromium, chromedriver or
python3-selenium are missing (tools/install-deps installs them)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

from harness import PeerProcess

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "dashboard"))
import check_dashboard  # noqa: E402

ARTIFACTS = Path(os.environ.get("FERRY_TEST_ARTIFACTS", tempfile.gettempdir()))

pytestmark = pytest.mark.skipif(check_dashboard.missing_prerequisites() is not None,
                                reason=str(check_dashboard.missing_prerequisites()))


@pytest.mark.deadline(150)
def test_the_dashboard_shows_a_join_and_a_kill(watched):
    master, base = watched
    address = f"127.0.0.1:{master.port}"
    peers = [PeerProcess(address, 3, "loop") for _ in range(3)]
    try:
        for p in peers:
            p.wait_ready()
        with check_dashboard.open_browser() as driver:
            driver.get(base)
            check_dashboard.wait_for_page(driver, expect_peers=3, expect_event_texts=["joined"], timeout=30)
            newcomer = PeerProcess(address, 4, "loop")
            peers.append(newcomer)
            newcomer.wait_ready(40)
            check_dashboard.wait_for_page(driver, expect_peers=4, timeout=30)
            victim = peers[1]
            victim.kill()
            snap = check_dashboard.wait_for_page(driver, expect_peers=3, expect_event_texts=["lost"],
                                                 absent_peers=[victim.peer_id], timeout=40)
            check_dashboard.save_screenshot(driver, str(ARTIFACTS / "dashboard-live.png"))
            assert str(newcomer.peer_id) in snap["ring"], check_dashboard.describe(snap)
    finally:
        for p in peers:
            p.close()
