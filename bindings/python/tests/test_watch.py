"""Watching a run (issue 18), with the real things: a master with its HTTP endpoint, peers
in their own processes doing all-reduces, a join and a SIGKILL; a real Prometheus server
scraping /metrics (Debian's prometheus, promtool); the dashboard in headless Chromium
(tests/dashboard/check_dashboard.py). Skipped where those programs are missing
(tools/install-deps installs them)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import ferry
from harness import PeerProcess

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "dashboard"))
import check_dashboard  # noqa: E402

ARTIFACTS = Path(os.environ.get("FERRY_TEST_ARTIFACTS", tempfile.gettempdir()))


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


@pytest.fixture
def watched():
    """A started master with its HTTP endpoint on loopback; yields (master, base URL)."""
    m = ferry.Master("127.0.0.1:0", http="127.0.0.1:0")
    m.start()
    yield m, f"http://127.0.0.1:{m.http_port}/"
    m.close()


def test_http_endpoint_is_off_unless_asked(master):
    with pytest.raises(ferry.InvalidUsageError, match="no HTTP endpoint"):
        master.http_port


def test_status_and_metrics_follow_a_run(watched):
    master, base = watched
    peers = [PeerProcess(f"127.0.0.1:{master.port}", 3, "loop") for _ in range(3)]
    try:
        for p in peers:
            p.wait_ready()
        ids = sorted(p.peer_id for p in peers)
        doc = wait_for("3 members and a committed all-reduce in /status",
                       lambda: (lambda d: d if len(d["groups"]) == 1 and sorted(d["groups"][0]["ring"]) == ids
                                and d["totals"]["committed"] > 0 else None)(status(base)))
        assert doc["version"] == 1
        assert {p["state"] for p in doc["peers"]} == {"member"}
        assert all(p["heartbeat_age_s"] < 5 for p in doc["peers"])
        assert any(h["kind"] == "all_reduce" and h["result"] == "ok" and h["bytes"] == 4096 * 4
                   for h in doc["history"])
        assert sum(e["kind"] == "join" for e in doc["events"]) == 3
        text = get(base + "metrics")
        assert '# TYPE ferry_master_collectives_total counter' in text
        assert 'ferry_master_collectives_total{group="0",kind="all_reduce",result="ok"}' in text
        assert 'ferry_master_peers{group="0",state="member"} 3' in text
        # Never the secret or tensors: nothing but what the schema names (the page is static).
        assert get(base).lstrip().lower().startswith("<!doctype html>")
        with pytest.raises(urllib.error.HTTPError) as missing:
            get(base + "nothing-here")
        assert missing.value.code == 404
    finally:
        for p in peers:
            p.close()


@pytest.mark.deadline(120)
@pytest.mark.skipif(not shutil.which("prometheus") or not shutil.which("promtool"),
                    reason="needs Debian's prometheus package (tools/install-deps)")
def test_a_real_prometheus_scrapes_the_master(watched, tmp_path):
    master, base = watched
    exposition = None
    peers = [PeerProcess(f"127.0.0.1:{master.port}", 3, "loop") for _ in range(3)]
    port = free_port()
    config = tmp_path / "prometheus.yml"
    http_port = master.http_port
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: ferry\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{http_port}']\n")
    server = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))
    try:
        for p in peers:
            p.wait_ready()
        wait_for("committed all-reduces", lambda: status(base)["totals"]["committed"] >= 10)
        exposition = get(base + "metrics")
        check = subprocess.run(["promtool", "check", "metrics"], input=exposition, capture_output=True,
                               text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr

        def committed_in_prometheus():
            query = "ferry_master_collectives_total{kind=\"all_reduce\",result=\"ok\"}"
            url = f"http://127.0.0.1:{port}/api/v1/query?query=" + urllib.parse.quote(query)
            answer = json.loads(get(url))
            results = answer["data"]["result"]
            return float(results[0]["value"][1]) if results else 0.0

        # What Prometheus stored is what the run did: at least what was committed before the query.
        seen = status(base)["totals"]["committed"]
        stored = wait_for("the series in Prometheus", lambda: (lambda v: v if v >= seen else None)(
            committed_in_prometheus()), timeout_s=60, every_s=1.0)
        assert stored <= status(base)["totals"]["committed"]
        up = json.loads(get(f"http://127.0.0.1:{port}/api/v1/query?query=up"))["data"]["result"]
        assert up and up[0]["value"][1] == "1"
    finally:
        server.terminate()
        server.wait(10)
        for p in peers:
            p.close()


@pytest.mark.deadline(150)
@pytest.mark.skipif(check_dashboard.missing_prerequisites() is not None,
                    reason=str(check_dashboard.missing_prerequisites()))
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


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.deadline(120)
def test_hostile_http_clients_do_not_disturb_the_run(watched):
    """Garbage, oversized heads, hundreds of idle connections and clients that never read,
    while three peers all-reduce in a loop: every collective still commits, at its usual
    pace, the endpoint still answers an honest client, and the master's memory stays put."""
    master, base = watched
    port = master.http_port
    peers = [PeerProcess(f"127.0.0.1:{master.port}", 3, "loop") for _ in range(3)]
    idle = []
    try:
        for p in peers:
            p.wait_ready()
        wait_for("50 committed all-reduces", lambda: status(base)["totals"]["committed"] >= 50)
        quiet = [h["seconds"] for h in status(base)["history"] if h["result"] == "ok"]
        rss_before = rss_bytes()
        storm_started = time.time()

        def connect() -> socket.socket:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            return s

        for _ in range(3):  # three rounds of every kind of abuse
            for junk in (b"\x00\xff" * 3000 + b"\r\n\r\n", b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n",
                         b"BREW /pot HTTP/1.1\r\n\r\n", b"GET nothing\r\n\r\n"):
                s = connect()
                try:
                    s.sendall(junk)
                    s.recv(4096)  # a 4xx, or the close
                except OSError:
                    pass  # a reset is a fine answer to garbage
                s.close()
            for _ in range(200):  # idle: connected, never a byte (beyond the caps: closed at once)
                try:
                    idle.append(connect())
                except OSError:
                    break
            for _ in range(5):  # asks for /status and never reads it
                s = connect()
                s.sendall(b"GET /status HTTP/1.1\r\nHost: x\r\n\r\n")
                idle.append(s)
            time.sleep(1.0)
        # The idle ones hold their places until the head deadline; an honest client gets in then.
        page = wait_for("an honest /status during the storm", lambda: status(base), timeout_s=20, every_s=0.5)
        assert page["totals"]["committed"] > 50
        for s in idle:
            s.close()
        idle.clear()
        time.sleep(1.0)
        during = [h for h in status(base)["history"] if h["t_unix"] >= storm_started]
        assert len(during) >= 20, f"only {len(during)} collectives during the storm"
        assert all(h["result"] == "ok" for h in during), [h for h in during if h["result"] != "ok"][:3]
        # Times within the usual range: the slowest during the storm no worse than the quiet run's
        # slowest by more than a generous margin (a master blocked by a client would stall for seconds).
        slowest_quiet = max(quiet)
        slowest_during = max(h["seconds"] for h in during)
        assert slowest_during <= max(10 * slowest_quiet, 0.5), (slowest_quiet, slowest_during)
        assert rss_bytes() - rss_before < 64 << 20
    finally:
        for s in idle:
            s.close()
        for p in peers:
            p.close()
