"""Watching a run (issue 18), with the real things: a master with its HTTP endpoint, peers
in their own processes doing all-reduces, a join and a SIGKILL. A real Prometheus server
scraping /metrics is in test_watch_prometheus.py, the dashboard in headless Chromium in
test_watch_dashboard.py: each is skipped as a whole where its programs are missing."""

from __future__ import annotations

import os
import socket
import time
import urllib.error

import pytest

import ferry
from harness import PeerProcess
from watch_http import get, status, wait_for


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
        # Peers report their links after collectives (at most once a second): on one host, shared memory.
        links = wait_for("the ring's links in /status", lambda: status(base)["groups"][0]["links"])
        assert all(link["shared_memory"] and not link["unreachable"] for link in links), links
        text = get(base + "metrics")
        assert 'ferry_master_link_shared_memory{' in text
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


def test_a_peer_label_shows_on_status_and_a_bad_one_is_refused(watched):
    """Communicator.set_label (ferry_comm_set_label): set before connect it reaches /status once
    the master welcomes the peer, a change replaces it, "" clears it; a label the master would
    refuse fails at the call, naming why, and leaves the shown one as it was."""
    master, base = watched
    comm = ferry.Communicator(f"127.0.0.1:{master.port}", listen_host="127.0.0.1", timeout=10)
    try:
        comm.set_label("warming up")

        def shown():  # the one peer's entry ({} until /status has it: it is published twice a second)
            peers = status(base)["peers"]
            return peers[0] if len(peers) == 1 else {}

        comm.connect()
        assert wait_for("the label set before connect", lambda: shown().get("label") == "warming up")
        comm.set_label("outer 3: 97 steps, 0 samples, share 24% of 4")
        wait_for("the new label", lambda: shown().get("label") == "outer 3: 97 steps, 0 samples, share 24% of 4")
        for bad, why in (("x" * 129, "at most 128 bytes, got 129"), ("two\nlines", r"printable ASCII.*0x0a"),
                         ("caf\u00e9", r"printable ASCII.*0xc3"), ("nul\0", "NUL"), (7, "must be a str")):
            with pytest.raises(ferry.InvalidArgumentError, match=why):
                comm.set_label(bad)
        comm.set_label("")
        wait_for("no label", lambda: "label" in shown() and shown()["label"] is None)
        assert shown()["state"] == "member"  # a label changes nothing else: still a member, never kicked
    finally:
        comm.close()
    with pytest.raises(ferry.InvalidUsageError, match="closed"):
        comm.set_label("late")


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
