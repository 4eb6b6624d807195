"""A real Prometheus server (Debian's prometheus, promtool) scraping a watched run's /metrics.
Skipped where those programs are missing (tools/install-deps installs them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse

import pytest

from harness import PeerProcess
from watch_http import free_port, get, status, wait_for

pytestmark = pytest.mark.skipif(not shutil.which("prometheus") or not shutil.which("promtool"),
                                reason="needs Debian's prometheus package (tools/install-deps)")


@pytest.mark.deadline(120)
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
