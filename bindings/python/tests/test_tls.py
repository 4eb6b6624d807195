"""TLS from Python: Master and Communicator take the tls_* files; a run over
TLS all-reduces like a plain one; bad files, a stranger's certificate and a
plain/TLS mismatch are clear errors."""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

import ferry
from harness import REPO_ROOT, join, make_peer, run_threads


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """ca.pem signed master/peer; rogue-ca.pem signed rogue (tools/gen-test-certs)."""
    tool = REPO_ROOT / "tools" / "gen-test-certs"
    good = tmp_path_factory.mktemp("certs")
    rogue = tmp_path_factory.mktemp("rogue")
    subprocess.run(["sh", str(tool), str(good), "master", "peer"], check=True, capture_output=True)
    subprocess.run(["sh", str(tool), str(rogue), "rogue"], check=True, capture_output=True)
    files = {name: str(good / name) for name in ("ca.pem", "master.pem", "master.key", "peer.pem", "peer.key")}
    files.update({"rogue-ca.pem": str(rogue / "ca.pem"), "rogue.pem": str(rogue / "rogue.pem"),
                  "rogue.key": str(rogue / "rogue.key")})
    return files


def tls_master(certs, **kw):
    return ferry.Master("127.0.0.1:0", tls_cert_file=certs["master.pem"], tls_key_file=certs["master.key"],
                        tls_ca_file=certs["ca.pem"], **kw)


def peer_tls(certs):
    return dict(tls_cert_file=certs["peer.pem"], tls_key_file=certs["peer.key"], tls_ca_file=certs["ca.pem"])


def test_a_run_over_tls_all_reduces_exactly(certs):
    with tls_master(certs) as m:
        address = f"127.0.0.1:{m.port}"

        def body(rank):
            with join(address, 3, **peer_tls(certs)) as comm:
                data = np.arange(100_003, dtype=np.float32) + comm.rank
                comm.all_reduce(data, op="sum")
                quant = np.full(4096, 1.0 + comm.rank, dtype=np.float32)
                comm.all_reduce(quant, op="avg", quant="u8")
                return data, quant

        results = run_threads(3, body)
    expected = np.arange(100_003, dtype=np.float32) * 3 + 3
    for data, quant in results:
        np.testing.assert_array_equal(data, expected)
        np.testing.assert_array_equal(quant, results[0][1])
        np.testing.assert_allclose(quant, 2.0, atol=0.02)


def test_bad_tls_files_raise_invalid_argument(certs):
    with pytest.raises(ferry.InvalidArgumentError, match="tls_ca_file"):
        make_peer("127.0.0.1:1", tls_cert_file=certs["peer.pem"], tls_key_file=certs["peer.key"])
    with pytest.raises(ferry.InvalidArgumentError, match="does not match"):
        make_peer("127.0.0.1:1", tls_cert_file=certs["peer.pem"], tls_key_file=certs["master.key"],
                  tls_ca_file=certs["ca.pem"])
    with pytest.raises(ferry.InvalidArgumentError, match="nowhere.pem"):
        ferry.Master("127.0.0.1:0", tls_cert_file="/nowhere.pem", tls_key_file=certs["master.key"])


def test_a_stranger_certificate_is_refused_with_auth_error(certs):
    with tls_master(certs) as m:
        with make_peer(f"127.0.0.1:{m.port}", tls_cert_file=certs["rogue.pem"], tls_key_file=certs["rogue.key"],
                       tls_ca_file=certs["rogue-ca.pem"]) as comm:
            with pytest.raises(ferry.AuthError):
                comm.connect()


def test_a_tls_peer_meeting_a_plain_master_gets_connect_error_at_once(certs):
    with ferry.Master("127.0.0.1:0") as m:
        with make_peer(f"127.0.0.1:{m.port}", **peer_tls(certs)) as comm:
            started = time.monotonic()
            with pytest.raises(ferry.ConnectError, match="TLS"):
                comm.connect()
            assert time.monotonic() - started < 5
