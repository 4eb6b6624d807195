#!/usr/bin/python3
"""Checks the master's dashboard page (src/master/dashboard/dashboard.html) in headless Chromium.

As a command:
  check_dashboard.py --url URL --expect-peers N [--expect-event-text TEXT ...]
                     [--absent-peer ID ...] [--screenshot PATH] [--timeout S]
loads the page and waits, at most --timeout seconds, until the ring drawing shows N members,
every expected text is in the event log and no absent peer is drawn; saves a PNG screenshot
(also on failure, where one can be taken). Exits 0 when all holds, 1 with the reason when not,
77 when this host lacks Chromium, chromedriver or python3-selenium.

As a module (the self-test, and the live-run test with a real master):
  with open_browser() as driver:
      driver.get(url)
      snap = wait_for_page(driver, expect_peers=3, expect_event_texts=["joined"], timeout=20)
      save_screenshot(driver, path)
snapshot() reads what the page shows in one script call, so a re-render between two reads
cannot mix two documents or leave a stale element behind.

Debian packages: chromium, chromium-driver, python3-selenium (tools/install-deps).
"""
import argparse
import contextlib
import importlib.util
import os
import shutil
import sys
import time

CHROMIUM = os.environ.get("FERRY_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FERRY_CHROMEDRIVER", "/usr/bin/chromedriver")
SKIPPED = 77  # ctest's SKIP_RETURN_CODE for this test


class DashboardCheckFailed(AssertionError):
    """What the page showed did not become what was expected in time."""


def missing_prerequisites():
    """None when a check can run here, else a sentence naming what is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if importlib.util.find_spec("selenium") is None:
        missing.append("the selenium Python module")
    if not missing:
        return None
    return ("cannot run the dashboard check: missing " + ", ".join(missing) +
            " (apt-get install chromium chromium-driver python3-selenium, or run tools/install-deps)")


@contextlib.contextmanager
def open_browser(width=1400, height=1500):
    """Headless Chromium under chromedriver, quit on exit. The window is tall enough that a
    screenshot shows the rings, the tables and the plots at once."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()


# One read of everything a check looks at; the hooks are documented at the top of dashboard.html.
_SNAPSHOT_JS = """
const ids = (sel) => Array.from(document.querySelectorAll(sel), (e) => e.getAttribute('data-peer-id'));
const banner = document.getElementById('banner');
const heads = Array.from(document.querySelectorAll('#peers-table thead th'), (h) => h.textContent);
return {
  last_update: document.body.dataset.lastUpdate || null,
  ring: ids('#groups g.ring-node'),
  joining: ids('#groups g.waiting-node'),
  waited_for: ids('#groups [data-waiting="true"]'),
  table: ids('#peers-table tbody tr'),
  peers: Array.from(document.querySelectorAll('#peers-table tbody tr'), (r) => Object.fromEntries(
    [['id', r.getAttribute('data-peer-id')], ...Array.from(r.cells, (c, i) => [heads[i], c.textContent])])),
  events: Array.from(document.querySelectorAll('#events li'), (e) => e.textContent),
  in_flight: Array.from(document.querySelectorAll('#in-flight li'), (e) => e.textContent),
  banner: banner && banner.classList.contains('shown') ? banner.textContent : null,
};
"""


def snapshot(driver):
    """What the page shows now: a dict with last_update (str or None), ring, joining,
    waited_for and table (lists of peer ids as strings), peers (the table's rows, each a dict
    from column heading to cell text, plus "id"), events and in_flight (lists of texts, newest
    event first) and banner (its text, or None when hidden)."""
    return driver.execute_script(_SNAPSHOT_JS)


def wait_until(driver, shortfalls, timeout):
    """Polls snapshot() until shortfalls(snap) returns an empty list; returns that snapshot.
    shortfalls names what the page does not show yet; when `timeout` seconds pass,
    DashboardCheckFailed says what is still missing and what the page shows instead."""
    deadline = time.monotonic() + timeout
    while True:
        snap = snapshot(driver)
        missing = shortfalls(snap)
        if not missing:
            return snap
        if time.monotonic() >= deadline:
            raise DashboardCheckFailed(f"after {timeout:g} s the page still lacks: {'; '.join(missing)}. "
                                       f"It shows {describe(snap)}")
        time.sleep(0.1)


def wait_for_render(driver, after=None, timeout=10):
    """Waits for a render later than `after` (a snapshot's last_update; None: any render)."""
    def shortfalls(snap):
        fresh = snap["last_update"] is not None and snap["last_update"] != after
        return [] if fresh else ["a fresh render" if after else "a first render"]
    return wait_until(driver, shortfalls, timeout)


def page_shortfalls(snap, expect_peers=None, expect_event_texts=(), absent_peers=()):
    """What a snapshot lacks of the expectations; an empty list when it meets them all."""
    missing = []
    if snap["last_update"] is None:
        missing.append("a successful render")
    if expect_peers is not None and len(snap["ring"]) != expect_peers:
        missing.append(f"{expect_peers} ring members (has {len(snap['ring'])})")
    for text in expect_event_texts:
        if not any(text in event for event in snap["events"]):
            missing.append(f"an event containing {text!r}")
    drawn = set(snap["ring"]) | set(snap["joining"])
    for peer in absent_peers:
        if str(peer) in drawn:
            missing.append(f"peer {peer} gone from the drawing")
    return missing


def wait_for_page(driver, expect_peers=None, expect_event_texts=(), absent_peers=(), timeout=20):
    """Waits until the page meets every expectation at once; returns that snapshot."""
    return wait_until(driver, lambda snap: page_shortfalls(snap, expect_peers, expect_event_texts,
                                                           absent_peers), timeout)


def describe(snap):
    """A one-line account of a snapshot, for failure messages."""
    events = snap["events"][:5]
    return (f"ring {snap['ring']}, joining {snap['joining']}, waited for {snap['waited_for']}, "
            f"banner {snap['banner']!r}, newest events {events}")


def save_screenshot(driver, path):
    """Saves the page as a PNG at `path` (folders made as needed); returns the path."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    if not driver.save_screenshot(path):
        raise DashboardCheckFailed(f"could not save a screenshot to {path}")
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the dashboard, e.g. http://127.0.0.1:8080/")
    parser.add_argument("--expect-peers", type=int, required=True, help="ring members the drawing must show")
    parser.add_argument("--expect-event-text", action="append", default=[], metavar="TEXT",
                        help="a text some event-log line must contain (repeatable)")
    parser.add_argument("--absent-peer", action="append", default=[], metavar="ID",
                        help="a peer id the drawing must not show (repeatable)")
    parser.add_argument("--screenshot", metavar="PATH", help="save a PNG of the page here")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds to wait (default 20)")
    args = parser.parse_args(argv)

    reason = missing_prerequisites()
    if reason:
        print(f"check_dashboard: SKIPPED: {reason}", file=sys.stderr)
        return SKIPPED
    with open_browser() as driver:
        try:
            driver.get(args.url)
            snap = wait_for_page(driver, args.expect_peers, args.expect_event_text, args.absent_peer,
                                 args.timeout)
        except Exception as e:  # a failed load is a failed check, said in one line
            print(f"check_dashboard: FAILED: {args.url}: {e}", file=sys.stderr)
            if args.screenshot:
                with contextlib.suppress(Exception):
                    print(f"check_dashboard: screenshot of the failure: {save_screenshot(driver, args.screenshot)}",
                          file=sys.stderr)
            return 1
        if args.screenshot:
            print(f"check_dashboard: screenshot: {save_screenshot(driver, args.screenshot)}")
    print(f"check_dashboard: ok: {len(snap['ring'])} ring members {snap['ring']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
