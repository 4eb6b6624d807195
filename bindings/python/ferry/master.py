"""An embedded ferry master (``ferry_master_*``): the run's coordinator, in this process."""

from __future__ import annotations

import ctypes
import threading
from typing import Optional

from . import _lib
from ._exit import close_unclosed, track_master
from .durations import Duration, from_millis
from .errors import InvalidUsageError
from .legacy import legacy_call
from .params import master_params

__all__ = ["Master"]


class Master:
    """A master serving on a library thread of this process.

    ``Master(listen)`` binds the listening socket and starts serving at once
    (a port conflict raises ConnectError here; ``"127.0.0.1:0"`` picks a free
    port, see :attr:`port`): a peer may connect as soon as the constructor
    returns. ``start=False`` only binds (a peer that connects meanwhile waits,
    and is told no ferry master answered) until :meth:`start`. As a context
    manager it starts on entry (if not started) and stops and frees on exit::

        with ferry.Master("127.0.0.1:0") as m:
            comm = ferry.Communicator(f"127.0.0.1:{m.port}")

    Threads: any thread may call any method; calls are serialized. The
    master's own work runs on its library thread, not the caller's.
    Ownership: the object owns the C ``ferry_master``; :meth:`close` frees it. One
    collected unclosed is closed on a thread of its own, with a ResourceWarning.

    Args (``listen`` first, the others keyword-only; 0.3's positional forms and
    ``peer_timeout_ms=`` still work with a DeprecationWarning):
        listen: ``"HOST:PORT"`` to listen on; PORT 0 picks a free port.
        peer_timeout: seconds (or a timedelta) a peer may be silent before it is
            removed (None: the library's default, 10 s).
        secret_file: path of the run secret (at least 16 bytes). Every peer must
            prove it holds the same secret (HMAC challenge-response; the secret
            never crosses the wire). None: ``$FERRY_SECRET_FILE`` if set, else no
            authentication. An unreadable or short file raises InvalidArgumentError.
        tls_cert_file / tls_key_file: PEM certificate (leaf first) and its unencrypted
            key: every connection to the master is then TLS 1.3. None (default): plain TCP.
        tls_ca_file: PEM CA; peers must present a certificate it signed (mutual TLS).
            None: the master asks peers for no certificate (membership rests on the
            secret). Unreadable, malformed or mismatched files raise InvalidArgumentError.
        http: ``"HOST:PORT"`` (or ``"PORT"``: loopback only) of a read-only HTTP endpoint for
            people watching the run: ``/`` a live dashboard, ``/status`` JSON, ``/metrics``
            Prometheus. PORT 0 picks a free port (see :attr:`http_port`). None (default): none.
        start: serve from construction (default True); False: bind only, serve from :meth:`start`.
    """

    @legacy_call(positional=("peer_timeout_ms", "secret_file", "tls_cert_file", "tls_key_file", "tls_ca_file",
                             "http", "start"),
                 renamed={"peer_timeout_ms": ("peer_timeout", from_millis)})
    def __init__(self, listen: str = "[::]:48148", *, peer_timeout: Optional[Duration] = None,
                 secret_file: Optional[str] = None, tls_cert_file: Optional[str] = None,
                 tls_key_file: Optional[str] = None, tls_ca_file: Optional[str] = None,
                 http: Optional[str] = None, start: bool = True) -> None:
        self._ptr: Optional[_lib.MasterPtr] = None
        self._lock = threading.Lock()
        self._running = False
        self._stopped = False  # a master serves once: the C master cannot listen again after stop
        lib = _lib.lib()
        params, strings = master_params(listen, peer_timeout, secret_file, tls_cert_file, tls_key_file,
                                        tls_ca_file, http)
        ptr = _lib.MasterPtr()
        _lib.check(lib.ferry_master_create_with(ctypes.byref(params), ctypes.byref(ptr)),
                   f"ferry.Master({listen!r})")
        del strings  # borrowed during ferry_master_create_with only
        self._ptr = ptr
        self.listen = listen
        track_master(self)
        if start:
            self.start()

    def _handle(self) -> _lib.MasterPtr:
        if self._ptr is None:
            raise InvalidUsageError("the master is closed")
        return self._ptr

    def start(self) -> "Master":
        """Starts serving on a library thread; returns at once. Returns self. A no-op while
        serving (the constructor starts it unless ``start=False``).

        Raises InvalidUsageError after :meth:`stop` (a master serves once: create a new one).
        """
        with self._lock:
            if self._stopped:
                raise InvalidUsageError("Master.start(): this master was stopped by Master.stop() and cannot "
                                        "serve again; create a new ferry.Master(...) (the same listen address "
                                        "is free again)")
            if not self._running:
                _lib.check(_lib.lib().ferry_master_run(self._handle()), "Master.start()")
                self._running = True
        return self

    @property
    def port(self) -> int:
        """The port the master listens on (the real one after asking for port 0). Does not block."""
        with self._lock:
            port = ctypes.c_uint16()
            _lib.check(_lib.lib().ferry_master_port(self._handle(), ctypes.byref(port)), "Master.port")
            return port.value

    @property
    def http_port(self) -> int:
        """The HTTP endpoint's port (``http=``); InvalidUsageError without one."""
        with self._lock:
            port = ctypes.c_uint16()
            _lib.check(_lib.lib().ferry_master_http_port(self._handle(), ctypes.byref(port)),
                       "Master.http_port")
            return port.value

    @property
    def running(self) -> bool:
        """True between start() and stop()."""
        return self._running

    def stop(self, restart: bool = False) -> None:
        """Stops serving: tells every peer the master is going away, closes every connection
        and joins the serving thread; the peers fail at once with MasterLostError.

        ``restart=True`` closes without a word, as a crash would: peers with a reconnect
        window (``master_reconnect_timeout``) see PeerLostError, dial this address again
        and resume with the ``Master`` started next on it. Blocks at most ~2 s (the GIL is
        released meanwhile). Idempotent; a no-op after close()."""
        with self._lock:
            if self._ptr is None:
                return
            if restart:
                _lib.check(_lib.lib().ferry_master_stop_for_restart(self._ptr), "Master.stop(restart=True)")
            else:
                _lib.check(_lib.lib().ferry_master_stop(self._ptr), "Master.stop()")
            self._running = False
            self._stopped = True

    def close(self) -> None:
        """Stops (if running) and frees the master. Idempotent."""
        with self._lock:
            ptr, self._ptr = self._ptr, None
            self._running = False
        if ptr is not None:
            _lib.lib().ferry_master_destroy(ptr)

    def __enter__(self) -> "Master":
        if not self._running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_ptr", None) is None:
            return
        try:
            close_unclosed(self, f"ferry.Master ({getattr(self, 'listen', None)!r})")
        except Exception:  # interpreter shutdown: the library may already be gone
            pass

    def __repr__(self) -> str:
        if self._ptr is None:
            return "<ferry.Master closed>"
        return f"<ferry.Master listen={self.listen!r} port={self.port} running={self._running}>"
