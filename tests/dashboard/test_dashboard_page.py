"""The dashboard page in a real (headless) browser, fed scripted /status documents.

A local http.server stands in for the master: it serves dashboard.html at "/" and, at
"/status", whichever fixture document the test shows now. The test walks a run a person
could watch: three members with an all-reduce waiting on one of them, a joiner, the join,
a kill, then the master gone; after each step it asserts what the page shows.
Screenshots go to $FERRY_TEST_ARTIFACTS when set, else to pytest's temporary folder.

  /usr/bin/python3 -m pytest tests/dashboard -q
"""
import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import check_dashboard as cd  # noqa: E402

PAGE = HERE.parents[1] / "src" / "master" / "dashboard" / "dashboard.html"

needs_browser = pytest.mark.skipif(bool(cd.missing_prerequisites()), reason=str(cd.missing_prerequisites()))

# Peer ids as the master makes them (wall clock in ms), and one past 2^53: JavaScript numbers
# cannot hold it, so the page must keep its digits as given.
A, B, C = 1764280000101, 1764280000202, 1764280000303
D = 2**53 + 1  # 9007199254740993; as a double it would read ...0992
NOW = 1764280300.0
HOSTILE_EVENT = '<script>window.__ferry_injected = 1</script><img src="x" onerror="window.__ferry_injected = 2">'
HOSTILE_ADDRESS = '<b id="injected">10.0.0.3</b>:4000'
HOSTILE_LABEL = '<b>outer 1</b>: 3 steps'  # printable ASCII: a master lets it through, the page shows it as text
JOIN_D = "rank 3 (peer 9007199254740993 at 10.0.0.4) joined"
LOST_C = "rank 2 (peer 1764280000303 at 10.0.0.3) lost: no heartbeat for 6 s (killed)"


class FixtureMaster:
    """Serves the page and the document given to show(), until stop()."""

    def __init__(self):
        self._doc = b"{}"
        page = PAGE.read_bytes()
        fixture = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/":
                    body, kind = page, "text/html; charset=utf-8"
                elif self.path == "/status":
                    body, kind = fixture._doc, "application/json"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"

    def show(self, doc):
        self.show_raw(json.dumps(doc).encode())

    def show_raw(self, body):
        self._doc = body  # one reference swap: a request sees one whole document

    def stop(self):
        """Closes the listening socket: the page's next fetch is refused."""
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


# The peers' labels (/status "label"; null when a peer set none).
LABELS = {A: "outer 3: 97 steps, 0 samples, share 24% of 4", C: HOSTILE_LABEL}


def peer(pid, rank, address, state="member", position=None):
    return {"id": pid, "group": 0, "rank": rank, "address": address, "host": address.rsplit(":", 1)[0],
            "state": state, "joined_unix": NOW - 200, "heartbeat_age_s": 0.3,
            "ring_position": position, "collectives_ok": 40, "collectives_failed": 1, "label": LABELS.get(pid)}


def event(dt, kind, pid, text):
    return {"t_unix": NOW - dt, "kind": kind, "group": 0, "peer": pid, "text": text}


BASE_EVENTS = [
    event(200, "join", A, "rank 0 (peer 1764280000101 at 10.0.0.1) joined"),
    event(199, "join", B, "rank 1 (peer 1764280000202 at 10.0.0.2) joined"),
    event(198, "join", C, "rank 2 (peer 1764280000303 at 10.0.0.3) joined"),
    event(150, "master", None, HOSTILE_EVENT),
]


def status_doc(ring, joining=(), in_flight=(), events=BASE_EVENTS, gone=()):
    """A version-1 /status document (notes/status-schema.md) for one group."""
    addresses = {A: "10.0.0.1:4000", B: "10.0.0.2:4000", C: HOSTILE_ADDRESS, D: "10.0.0.4:4000"}
    ranks = {A: 0, B: 1, C: 2, D: 3}
    peers = [peer(p, ranks[p], addresses[p], position=i) for i, p in enumerate(ring)]
    peers += [peer(p, None, addresses[p], state="joining") for p in joining]
    # Measured links along the ring except the last edge (last -> first), left unknown.
    links = [{"from": a, "to": b, "bandwidth_Bps": bw, "rtt_s": 0.0002, "age_s": 3.0, "unreachable": False}
             for (a, b), bw in zip(zip(ring, ring[1:]), (1.1e9, 2.0e7, 5e8))]
    history = [{"t_unix": NOW - 120 + i, "group": 0, "kind": "all_reduce",
                "result": "ok" if i % 20 else "peer lost", "bytes": 4_000_000, "seconds": 0.01 + 0.0005 * i}
               for i in range(100)]
    return {
        "version": 1,
        "master": {"listen": "[::]:48148", "uptime_s": 300.5, "now_unix": NOW, "protocol": 7,
                   "peers": len(peers), "connections": len(peers)},
        "totals": {"committed": 95, "aborted": 5, "bytes_reduced": 123456, "syncs_committed": 0,
                   "sync_bytes_fetched": 0, "joins": 3 + len(gone), "resumes": 0, "left": 0,
                   "lost": len(gone), "kicked": 0},
        "groups": [{"id": 0, "epoch": 3, "broken": False, "shared_revision": None, "ring": list(ring),
                    "ring_bottleneck_Bps": 2.0e7, "arrival_bottleneck_Bps": None,
                    "waiting": list(joining), "voting": [], "in_flight": list(in_flight), "links": links}],
        "peers": peers,
        "history": history,
        "events": list(events),
    }


def test_page_fetches_nothing_but_status_and_inserts_no_markup():
    """Air-gapped clusters: no URL but the SVG namespace, no external script, style, font or
    image; and text from the network never goes through innerHTML and its kin."""
    page = PAGE.read_text()
    assert set(re.findall(r"https?://[^\s\"'<>)]+", page)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"<(link|img|iframe|object|embed)\b|<script\s[^>]*src|@import|@font-face", page)
    assert re.findall(r"url\((?!#)", page) == []
    assert re.findall(r"fetch\(([^,)]*)", page) == ['"status"']
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", page)


WAITING_ON_B = {"seq": 12, "kind": "all_reduce", "tag": 0, "bytes": 4096, "phase": "transfer",
                "age_s": 0.2, "waiting_for": [B]}


@pytest.fixture
def artifacts(tmp_path):
    folder = Path(os.environ.get("FERRY_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def master():
    m = FixtureMaster()
    yield m
    m.stop()


@needs_browser
def test_page_follows_a_run_with_a_join_a_kill_and_the_master_gone(master, artifacts):
    ids = lambda *peers: [str(p) for p in peers]  # noqa: E731 (the page's hooks hold ids as text)
    master.show(status_doc([A, B, C], in_flight=[WAITING_ON_B]))
    with cd.open_browser() as driver:
        driver.get(master.url)
        snap = cd.wait_for_page(driver, expect_peers=3, expect_event_texts=["joined"], timeout=20)

        # Three members in ring order; the all-reduce waits on B, and only B is marked.
        assert snap["ring"] == ids(A, B, C)
        assert snap["waited_for"] == ids(B)
        assert any("all_reduce #12" in f and "transfer" in f and "rank 1 · …0202" in f for f in snap["in_flight"])
        assert driver.execute_script(
            "return document.querySelector('g.ring-node[data-peer-id=\"%s\"] circle.wait-mark') !== null" % B)
        # Measured edges are solid, the unmeasured last -> first edge grey and dashed.
        dashes = driver.execute_script("""
            return Array.from(document.querySelectorAll('g.ring-edge'), (g) =>
              [g.dataset.from, g.dataset.to, g.querySelector('path').getAttribute('stroke-dasharray')]);""")
        assert dashes == [[str(A), str(B), None], [str(B), str(C), None], [str(C), str(A), "5 4"]]
        header = driver.execute_script("return document.getElementById('h-bytes').textContent")
        assert header == "123.5 kB"
        # Plots drawn from history: a dot per collective (5 not ok), a throughput line.
        assert driver.execute_script("return document.querySelectorAll('#plot-time circle').length") == 100
        assert driver.execute_script("return document.querySelectorAll('#plot-time circle.failed').length") == 5
        assert driver.execute_script("return document.querySelectorAll('#plot-throughput polyline').length") == 1

        # Network text stays text: the markup shows literally and nothing ran.
        assert snap["events"][0].endswith(HOSTILE_EVENT)
        assert driver.execute_script("return window.__ferry_injected === undefined")
        assert driver.execute_script(
            "return document.querySelectorAll('#events script, #events img, #peers-table b').length") == 0
        assert next(p for p in snap["peers"] if p["id"] == str(C))["address"] == HOSTILE_ADDRESS
        # What each peer says of itself (ferry_comm_set_label), as text; none: an empty cell.
        says = {p["id"]: p["says"] for p in snap["peers"]}
        assert says == {str(A): LABELS[A], str(B): "", str(C): HOSTILE_LABEL}, says
        cd.save_screenshot(driver, str(artifacts / "dashboard-3-peers.png"))

        # A joiner waits outside the ring; its id, past 2^53, keeps every digit.
        master.show(status_doc([A, B, C], joining=[D]))
        snap = cd.wait_until(driver, lambda s: [] if s["joining"] == ids(D) else ["the joiner"], 10)
        assert snap["ring"] == ids(A, B, C) and snap["waited_for"] == []
        assert any("none" in f for f in snap["in_flight"])
        cd.save_screenshot(driver, str(artifacts / "dashboard-joining.png"))

        # The join: four members.
        joined = BASE_EVENTS + [event(20, "join", D, JOIN_D)]
        master.show(status_doc([A, B, C, D], events=joined))
        snap = cd.wait_for_page(driver, expect_peers=4, expect_event_texts=[JOIN_D], timeout=10)
        assert snap["ring"] == ids(A, B, C, D) and snap["joining"] == []
        assert next(p for p in snap["peers"] if p["id"] == str(D))["peer"] == "rank 3 · …0993"

        # The kill: C leaves the drawing and the table; the log names the join and the kill.
        master.show(status_doc([A, B, D], events=joined + [event(5, "lost", C, LOST_C)], gone=[C]))
        snap = cd.wait_for_page(driver, expect_peers=3, expect_event_texts=[JOIN_D, LOST_C],
                                absent_peers=[C], timeout=10)
        assert snap["ring"] == ids(A, B, D)
        assert str(C) not in snap["table"]
        assert LOST_C in snap["events"][0] and JOIN_D in snap["events"][1]  # newest first
        assert snap["banner"] is None
        cd.save_screenshot(driver, str(artifacts / "dashboard-after-kill.png"))

        # The master stops answering: a banner says since when; the last data stays.
        master.stop()
        snap = cd.wait_until(
            driver, lambda s: [] if s["banner"] and "master unreachable since" in s["banner"] else ["the banner"], 10)
        assert snap["ring"] == ids(A, B, D)
        cd.save_screenshot(driver, str(artifacts / "dashboard-unreachable.png"))
    assert (artifacts / "dashboard-after-kill.png").read_bytes().startswith(b"\x89PNG")


@needs_browser
def test_command_line_passes_and_fails_with_a_reason(master, artifacts):
    master.show(status_doc([A, B, C], in_flight=[WAITING_ON_B]))
    shot = artifacts / "check-dashboard-cli.png"
    command = [sys.executable, str(HERE / "check_dashboard.py"), "--url", master.url]
    ok = subprocess.run(command + ["--expect-peers", "3", "--expect-event-text", "joined",
                                   "--absent-peer", str(D), "--screenshot", str(shot)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert shot.read_bytes().startswith(b"\x89PNG")

    bad = subprocess.run(command + ["--expect-peers", "5", "--absent-peer", str(B), "--timeout", "2"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert "5 ring members (has 3)" in bad.stderr and f"peer {B} gone from the drawing" in bad.stderr


@needs_browser
def test_two_groups_an_unreachable_link_a_vote_and_a_bad_document(master, artifacts):
    doc = status_doc([A, B], in_flight=[dict(WAITING_ON_B, phase="start", waiting_for=[A, B])])
    group0 = doc["groups"][0]
    group0["voting"] = [A]
    group0["links"].append({"from": B, "to": A, "bandwidth_Bps": None, "rtt_s": None, "age_s": 1.0,
                            "unreachable": True})
    group0["relayed_hops"] = [{"from": A, "to": B, "relay": C}]  # C relays group 0's A -> B
    doc["groups"].append(dict(group0, id=1, ring=[C], broken=True, voting=[], in_flight=[], links=[],
                              relayed_hops=[]))
    doc["peers"].append(dict(peer(C, 0, "10.0.0.3:4000", position=0), group=1))
    master.show(doc)
    with cd.open_browser() as driver:
        driver.get(master.url)
        snap = cd.wait_for_page(driver, expect_peers=3, timeout=20)
        per_group = driver.execute_script("""
            return Array.from(document.querySelectorAll('#groups .group'), (g) => [g.dataset.groupId,
              Array.from(g.querySelectorAll('g.ring-node'), (n) => n.dataset.peerId),
              Array.from(g.querySelectorAll('g.ring-edge path'), (p) => p.getAttribute('stroke-dasharray')),
              g.textContent.includes('broken')]);""")
        # Two members: an edge each way (the one back unreachable); one member: no edge at all.
        assert per_group == [["0", [str(A), str(B)], [None, "2 4"], False], ["1", [str(C)], [], True]]
        assert snap["waited_for"] == [str(A), str(B)]
        assert any("start" in f and "rank 0 · …0101, rank 1 · …0202" in f for f in snap["in_flight"])
        assert driver.execute_script(
            "return document.querySelector('g.ring-node[data-peer-id=\"%s\"]').dataset.voting" % A) == "true"
        # The relayed link: its edge names the relay, and a line under the ring says it.
        relayed = driver.execute_script("""
            return [Array.from(document.querySelectorAll('g.ring-edge[data-relay]'), (e) => [e.dataset.from, e.dataset.to, e.dataset.relay]),
                    Array.from(document.querySelectorAll('.relayed-hop'), (d) => d.textContent)];""")
        assert relayed[0] == [[str(A), str(B), str(C)]]
        assert len(relayed[1]) == 1 and "through" in relayed[1][0]
        cd.save_screenshot(driver, str(artifacts / "dashboard-two-groups.png"))

        # A document that does not parse: said in the banner, the last good data stays.
        master.show_raw(b'{"version": 1, "groups": [')
        snap = cd.wait_until(driver, lambda s: [] if s["banner"] and "bad /status" in s["banner"] else ["the banner"], 10)
        assert snap["ring"] == [str(A), str(B), str(C)]
