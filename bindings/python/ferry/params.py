"""Python arguments -> ferry.h parameter structs, with the checks ctypes does not make.

ctypes silently wraps an out-of-range integer into a C field (-1 becomes
4294967295) and accepts any object it can coerce; every value is checked
here first and refused with InvalidArgumentError. Defaults come from the
library's own ``*_init`` functions (None means "keep the library's default").
"""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from . import _lib
from .durations import millis
from .errors import InvalidArgumentError

__all__ = ["uint", "master_params", "comm_params"]


def uint(name: str, value: Any, bits: int) -> int:
    """value if it is an int in 0..2**bits-1, else InvalidArgumentError."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < (1 << bits):
        raise InvalidArgumentError(f"{name} must be an integer in 0..2**{bits}-1, got {value!r}")
    return value


class _Strings:
    """Encodes char* fields and keeps the bytes alive as long as the struct is used."""

    def __init__(self) -> None:
        self.kept: List[bytes] = []

    def text(self, name: str, value: Any) -> bytes:
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a string, got {value!r}")
        self.kept.append(value.encode())
        return self.kept[-1]

    def path(self, name: str, value: Any) -> bytes:
        try:
            raw = os.fsencode(value)
        except TypeError:
            raise InvalidArgumentError(f"{name} must be a path, got {value!r}") from None
        self.kept.append(raw)
        return raw


def _tls(params: Any, strings: _Strings, cert: Any, key: Any, ca: Any) -> None:
    """Sets the tls_* fields that are given (the library checks which combinations it accepts)."""
    for field, value in (("tls_cert_file", cert), ("tls_key_file", key), ("tls_ca_file", ca)):
        if value is not None:
            setattr(params, field, strings.path(field, value))


def master_params(listen: Any, peer_timeout: Any, secret_file: Any, tls_cert_file: Any = None,
                  tls_key_file: Any = None, tls_ca_file: Any = None,
                  http: Any = None) -> Tuple[_lib.MasterParams, _Strings]:
    """A ferry_master_params; keep the second value alive until ferry_master_create_with returns."""
    strings = _Strings()
    params = _lib.defaults(_lib.MasterParams, "ferry_master_params_init")
    params.listen_address = strings.text("listen", listen)
    if peer_timeout is not None:
        params.peer_timeout_ms = millis("peer_timeout", peer_timeout)
    if secret_file is not None:
        params.secret_file = strings.path("secret_file", secret_file)
    _tls(params, strings, tls_cert_file, tls_key_file, tls_ca_file)
    if http is not None:
        params.http_address = strings.text("http", str(http) if isinstance(http, int) else http)
    return params, strings


def comm_params(master: Any, *, peer_group: Optional[int] = None, connections: Optional[int] = None,
                listen_host: Any = None, port_range: Optional[Tuple[int, int]] = None,
                advertised_host: Optional[str] = None, advertised_port: Optional[int] = None,
                timeout: Any = None, progress_timeout: Any = None,
                heartbeat_timeout: Any = None, io_threads: Optional[int] = None,
                max_chunk_bytes: Optional[int] = None, congestion_control: Optional[str] = None,
                secret_file: Any = None, tls_cert_file: Any = None, tls_key_file: Any = None,
                tls_ca_file: Any = None, shared_memory: Optional[bool] = None,
                master_reconnect_timeout: Any = None,
                master_connect_timeout: Any = None,
                dial_out_only: Optional[bool] = None,
                relay: Optional[bool] = None) -> Tuple[_lib.CommParams, _Strings]:
    """A ferry_comm_params from Communicator's arguments, None leaving ferry_comm_params_init's
    default; keep the second value alive until ferry_comm_create returns (it copies the strings)."""
    strings = _Strings()
    params = _lib.defaults(_lib.CommParams, "ferry_comm_params_init")
    if master is not None:  # None: the library reads $FERRY_MASTER_ADDR
        params.master_address = strings.text("master", master)
    if listen_host is not None:
        params.p2p_listen_host = strings.text("listen_host", listen_host)
    if port_range is not None:
        try:
            low, high = port_range
        except (TypeError, ValueError):
            raise InvalidArgumentError(f"port_range must be (min, max), got {port_range!r}") from None
        params.p2p_port_min = uint("port_range[0]", low, 16)
        params.p2p_port_max = uint("port_range[1]", high, 16)
    if advertised_host is not None:
        params.advertised_host = strings.text("advertised_host", advertised_host)
    if advertised_port is not None:
        params.advertised_port = uint("advertised_port", advertised_port, 16)
    for field, name, value in (("peer_group", "peer_group", peer_group),
                               ("p2p_connections", "connections", connections),
                               ("io_threads", "io_threads", io_threads),
                               ("max_chunk_bytes", "max_chunk_bytes", max_chunk_bytes)):
        if value is not None:
            setattr(params, field, uint(name, value, 32))
    # Durations in seconds (or timedelta) -> the C fields' milliseconds.
    for name, value in (("timeout", timeout), ("progress_timeout", progress_timeout),
                        ("heartbeat_timeout", heartbeat_timeout),
                        ("master_reconnect_timeout", master_reconnect_timeout),
                        ("master_connect_timeout", master_connect_timeout)):
        if value is not None:
            setattr(params, f"{name}_ms", millis(name, value))
    if congestion_control is not None:
        params.congestion_control = strings.text("congestion_control", congestion_control)
    if secret_file is not None:
        params.secret_file = strings.path("secret_file", secret_file)
    _tls(params, strings, tls_cert_file, tls_key_file, tls_ca_file)
    for field, value in (("shared_memory", shared_memory), ("dial_out_only", dial_out_only)):
        if value is not None:
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"{field} must be True, False or None, got {value!r}")
            setattr(params, field, int(value))
    if relay is not None:
        if not isinstance(relay, bool):
            raise InvalidArgumentError(f"relay must be True, False or None, got {relay!r}")
        params.refuse_relay = int(not relay)
    return params, strings
