"""A peer of a ferry run (``ferry_comm``): its life (create, close), the calls' plumbing, and
shared state; the membership calls (membership.py), the all-reduces (reduce_calls.py) and
the all-gathers (gather.py) are mixed in, each in a file of its own."""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Callable, Collection, Mapping, Optional, Tuple, TypeVar, Union

from . import _lib
from ._exit import close_unclosed, track_communicator
from .async_op import AsyncOp
from .call_gate import CallGate
from .completion_watch import CompletionWatch
from .durations import Duration, from_millis
from .errors import InvalidUsageError
from .gather import GatherCalls
from .handle import Handle, OpInfo
from .issue_queue import IssueQueue
from .legacy import legacy_call
from .membership import MembershipCalls
from .params import comm_params
from .reduce_calls import ReduceCalls
from .shared_state import SyncInfo, SyncStrategy, sync_shared_state

__all__ = ["Communicator"]

R = TypeVar("R")


class Communicator(MembershipCalls, ReduceCalls, GatherCalls):
    """One peer of a run: talks to the master, holds the p2p links of its ring, runs all-reduces.

    Lifecycle: ``Communicator(...)`` binds the peer-to-peer listener (no
    network traffic yet); :meth:`connect` joins the run; :meth:`close` (or
    leaving a ``with`` block) leaves it cleanly.

    Threads: any thread may call any method. Collective calls (connect,
    update_topology, peers_pending, the all-reduces) must be issued in the
    same order on every peer of the group, as with MPI (the master reports
    mismatches as MismatchError). Every blocking call goes through ctypes,
    which releases the GIL for the call's duration, so other Python threads
    run while this one waits on the network; the library's own io_threads
    do the transfers and reductions.

    Deadlines: every blocking call is bounded (see the ``*timeout`` arguments, in
    seconds as every duration of the Python API); nothing waits forever.

    Ctrl-C: on the main thread every blocking call (connect, update_topology,
    optimize_topology, wait_for_world, peers_pending, links, the all-reduces,
    barrier, broadcast, sync_shared_state, Handle.wait) raises KeyboardInterrupt
    within about 0.05 s of SIGINT (likewise any exception a signal handler
    raises, e.g. SystemExit from a SIGTERM handler), and the communicator is
    then **closed**: the library aborts it (``ferry_comm_abort``), so the call
    ends at once and the master drops this peer at once; the other members'
    collective in progress, or their next one, fails with PeerLostError
    (retryable: they call update_topology and go on without this peer), as for a
    peer that left. Every later call here raises InvalidUsageError ("closed");
    async ops still in flight fail (their wait() raises InvalidUsageError). The
    library frees the communicator on a thread of its own once the interrupted
    call has returned (close() waits for that). To run on, create a new
    Communicator and connect() again: it joins as a newcomer. A second Ctrl-C is
    never swallowed: it raises where the program then is, as Python's default.
    Calls on other threads are not interrupted (Python runs signal handlers on
    the main thread only); an interrupt on the main thread ends their calls too,
    with InvalidUsageError.

    Ownership: the object owns the C ``ferry_comm``; close() frees it. One collected
    unclosed is closed on a thread of its own (a garbage-collection pass never waits for
    the seconds a close may take) with a ResourceWarning, as an unclosed file. Tensors are
    borrowed only during a blocking call; an async op borrows them until its Handle is
    waited (see Handle).

    Args: ``master`` first; every other argument is keyword-only, and None (the default
    for each) leaves the library's default from ``ferry_comm_params_init``, shown in
    parentheses (ferry.h documents each field). Durations are seconds (a float) or a
    ``datetime.timedelta``; the 0.3 names ``timeout_ms=`` etc. still work, in milliseconds,
    with a DeprecationWarning (ferry.legacy):
        master: ``"HOST:PORT"`` of the master (``"[V6ADDR]:PORT"`` for IPv6). None (default):
            ``$FERRY_MASTER_ADDR``; InvalidArgumentError when that is unset too. The TLS files
            likewise default to ``$FERRY_TLS_CERT_FILE``/``KEY_FILE``/``CA_FILE``, the secret to
            ``$FERRY_SECRET_FILE`` (docs/operating.md, "Environment"), so a launched script needs no arguments.
        peer_group: ring id; groups never exchange data (0).
        connections: parallel TCP connections to each ring neighbour: None (default) adapts them
            to each link (4 on a LAN, up to 64 on a long lossy path); 1..64 pins the count.
        listen_host: address the p2p listener binds ("::": IPv6 and IPv4).
        port_range: ``(min, max)`` inclusive p2p port range (the system chooses).
        advertised_host / advertised_port: what other peers should dial (NAT, proxies).
        timeout: longest wait for other peers: admission, votes, the start and
            commit of a collective (60 s).
        progress_timeout: a transfer stalled this long fails with TimeoutError (20 s).
        heartbeat_timeout: silence after which the master drops this peer, and
            after which a silent master is MasterLostError (10 s).
        io_threads: library threads for network I/O and reductions, 1..64 (2).
        max_chunk_bytes: largest pipelining unit, 4 KiB..64 MiB (256 KiB).
        congestion_control: TCP congestion control for p2p sockets ("bbr", "cubic", ...).
        secret_file: path of the run secret (see Master); proves this peer to the master
            and to other peers and checks theirs (AuthError on connect when they differ).
            None: ``$FERRY_SECRET_FILE`` if set, else no authentication.
        tls_cert_file / tls_key_file / tls_ca_file: all three (PEM) for TLS 1.3 on the
            master connection and every p2p link, the master and other peers verified
            against the CA (mutual TLS); all None (default) for plain TCP. Partial or bad
            files raise InvalidArgumentError; on connect, a refused certificate is
            AuthError, a plain/TLS mismatch with the master ConnectError.
        shared_memory: ring connections to peers on this machine (same network and mount
            namespace) carry their bytes through shared memory, the TCP connection kept
            beside it for authentication and liveness (True); False keeps every byte on TCP,
            as a proxy or fault injector between local peers needs.
        master_reconnect_timeout: how long an admitted peer keeps dialing a master it
            lost (300 s; 0: MasterLostError at once). Meanwhile collectives raise
            PeerLostError (retryable) and update_topology waits for the master; a master
            started again on the same address takes the peer back in its place (ferry.h).
        master_connect_timeout: how long connect() keeps dialing a master that does not
            answer yet (60 s; 0: one dial), so peers may start before their master.
            A refused address gets 10 tries (~5.5 s) within it, an unresolvable name one.
        dial_out_only: True for a machine that accepts no connection (behind NAT, a cloud
            security group or a firewall admitting nothing inbound) but can dial out: it
            opens no p2p listener and the master has its links dialed from its side; two
            such neighbours punch through, or have a third peer relay their link (False: it
            listens; ferry.h has the rest).
        relay: False to refuse forwarding ring links for two other members that can
            neither dial nor punch through to each other (True: the master may ask it;
            ferry.h, refuse_relay).

    Raises InvalidArgumentError for bad values, ConnectError when no p2p port can be bound.
    """

    @legacy_call(renamed={f"{name}_ms": (name, from_millis) for name in (
        "timeout", "progress_timeout", "heartbeat_timeout", "master_reconnect_timeout", "master_connect_timeout")})
    def __init__(
        self,
        master: Optional[str] = None,
        *,
        peer_group: Optional[int] = None,
        connections: Optional[int] = None,
        listen_host: Optional[str] = None,
        port_range: Optional[Tuple[int, int]] = None,
        advertised_host: Optional[str] = None,
        advertised_port: Optional[int] = None,
        timeout: Optional[Duration] = None,
        progress_timeout: Optional[Duration] = None,
        heartbeat_timeout: Optional[Duration] = None,
        io_threads: Optional[int] = None,
        max_chunk_bytes: Optional[int] = None,
        congestion_control: Optional[str] = None,
        secret_file: Optional[str] = None,
        tls_cert_file: Optional[str] = None,
        tls_key_file: Optional[str] = None,
        tls_ca_file: Optional[str] = None,
        shared_memory: Optional[bool] = None,
        master_reconnect_timeout: Optional[Duration] = None,
        master_connect_timeout: Optional[Duration] = None,
        dial_out_only: Optional[bool] = None,
        relay: Optional[bool] = None,
    ) -> None:
        self._gate: Optional[CallGate] = None  # every C call on the handle goes through it
        self._local = threading.local()  # per-thread last_info
        # Async all-reduces of CUDA tensors, issued once ferry's copy reached host memory.
        self._issues = IssueQueue("ferry-issue")
        # ... and reaped as soon as they finish, so that the result's copy back starts then.
        self._completions = CompletionWatch("ferry-copy-back")

        lib = _lib.lib()
        params, strings = comm_params(
            master, peer_group=peer_group, connections=connections, listen_host=listen_host,
            port_range=port_range, advertised_host=advertised_host, advertised_port=advertised_port,
            timeout=timeout, progress_timeout=progress_timeout,
            heartbeat_timeout=heartbeat_timeout, io_threads=io_threads, max_chunk_bytes=max_chunk_bytes,
            congestion_control=congestion_control, secret_file=secret_file, tls_cert_file=tls_cert_file,
            tls_key_file=tls_key_file, tls_ca_file=tls_ca_file, shared_memory=shared_memory,
            master_reconnect_timeout=master_reconnect_timeout,
            master_connect_timeout=master_connect_timeout, dial_out_only=dial_out_only, relay=relay)
        ptr = _lib.CommPtr()
        _lib.check(lib.ferry_comm_create(ctypes.byref(params), ctypes.byref(ptr)), "ferry.Communicator()")
        del strings  # copied by ferry_comm_create
        self._gate = CallGate(ptr, before_destroy=self._issues.drain)
        track_communicator(self)
        self.master = master if master is not None else os.environ.get("FERRY_MASTER_ADDR")
        #: seconds: the longest wait for other peers (``timeout``, or the library's default)
        self.timeout: float = params.timeout_ms / 1000
        self._desc = _lib.defaults(_lib.AllreduceDesc, "ferry_allreduce_desc_init")
        self._job = _lib.defaults(_lib.AllreduceJob, "ferry_allreduce_job_init")
        # The job's embedded desc is versioned on its own.
        ctypes.memmove(ctypes.addressof(self._job.desc), ctypes.addressof(self._desc), ctypes.sizeof(self._desc))

    # ------------------------------------------------------------------ plumbing

    def _blocking(self, what: str, call: Callable[[_lib.CommPtr], R]) -> R:
        """``call(ptr)``, a blocking C call on the handle and its check, through the gate.

        On the main thread Ctrl-C interrupts it (see "Ctrl-C" in the class docstring).
        ``call`` must hold what the C call borrows: when interrupted it returns after this.
        Async issues still queued (CUDA inputs) go first: collectives keep their order.
        """
        self._issues.drain()
        ptr = self._gate.begin(what)
        return self._gate.run_blocking(ptr, what, lambda: call(ptr))

    def _start_async(self, what: str, plan: Any, issue: Callable[[_lib.CommPtr, _lib.OpPtr], int],
                     watch: bool = False) -> Handle:
        """An async op over ``plan``: ``issue(ptr, op_ptr)`` (the C call) runs now, or on the issue
        thread once a CUDA input reached host memory (or behind queued issues: collectives keep
        their order). ``watch``: reap it as soon as it finishes (a CUDA result's copy back)."""
        with self._gate.call(what):
            # Tracked before close() can run, so close() always settles it (or fails its issue).
            op = AsyncOp(plan, self._gate)
            self._gate.track(op)
            if watch:
                self._completions.watch(op)
            if plan.on_device or self._issues.busy():
                self._issues.submit(lambda: self._issue(what, op, plan, issue))
                return Handle(op)
        self._issue(what, op, plan, issue)
        if op.error is not None:
            raise op.error  # issued on the caller's thread: its errors are raised at once
        return Handle(op)

    def _issue(self, what: str, op: AsyncOp, plan: Any, issue: Callable[[_lib.CommPtr, _lib.OpPtr], int]) -> None:
        """The C issue once the input is in host memory; the outcome goes to ``op``."""
        try:
            plan.wait_copied()
            op_ptr = _lib.OpPtr()
            with self._gate.call(what) as ptr:
                _lib.check(issue(ptr, op_ptr), what)
                op.issue_done(op_ptr)
        except Exception as e:  # noqa: BLE001 - raised by wait() (or at once on the caller's thread)
            op.issue_failed(e)

    # ------------------------------------------------------------------ results

    @property
    def last_info(self) -> Optional[OpInfo]:
        """The OpInfo of the last all_reduce / all_reduce_many that succeeded on *this thread*
        (None before the first)."""
        return getattr(self._local, "info", None)

    @property
    def closed(self) -> bool:
        return self._gate.closed

    # ------------------------------------------------------------------ shared state

    @legacy_call(positional=("revision", "strategy", "allow_inequality", "compression_level"))
    def sync_shared_state(self, tensors: Mapping[str, Any], *, revision: int,
                          strategy: Union[str, SyncStrategy] = "enforce_popular",
                          allow_inequality: Collection[str] = (), compression_level: int = 0) -> SyncInfo:
        """Collective over the group: afterwards every peer holds the same bytes in every tensor
        (except those named in ``allow_inequality``, e.g. an RNG state, never compared or moved).

        Each peer hashes its tensors; the master elects the winning content per tensor;
        peers whose bytes differ fetch the winning bytes from holders over p2p, verify
        them, and only then return. Matching is by name (same names, dtypes and element
        counts on every peer; any order).

        Args:
            tensors: ``{name: tensor}``; contiguous CPU torch tensors / numpy arrays are
                read and overwritten in place (zero-copy); CUDA tensors are staged through
                host memory and the changed ones copied back.
            revision: this peer's revision. The highest revision offered by the peers that
                are not receive-only must be the group's previous revision + 1 (any value
                for the first sync); lower ones are behind and receive.
            strategy: "enforce_popular" (default: the most common bytes win), "receive_only"
                (a newcomer: never sends, ends with the winning bytes) or "send_only" (this
                peer's bytes must win; its tensors are never written, so read-only arrays
                are fine).
            allow_inequality: names of tensors that may differ between peers (same on all).
            compression_level: zstd level this peer asks holders to use when it fetches
                (0: raw bytes).

        Returns a SyncInfo (the group's new revision and the names of the tensors
        overwritten). Tensors are borrowed until the call returns. Blocks at most
        timeout waiting for the other peers and progress_timeout without a byte
        moving (GIL released). On failure the fetched tensors hold unspecified bytes;
        call update_topology() and sync again. Raises InvalidArgumentError, InvalidUsageError
        (not connected; the revision rule; every peer receive-only), MismatchError (peers
        declare different tensors), PeerLostError, TimeoutError, ProtocolError (fetched bytes
        did not verify), MasterLostError, KickedError.
        """
        return self._blocking("sync_shared_state", lambda ptr: sync_shared_state(
            ptr, tensors, revision, strategy, allow_inequality, compression_level))

    # ------------------------------------------------------------------ teardown

    def close(self) -> None:
        """Leaves the run cleanly and frees the communicator (``ferry_comm_destroy``). Idempotent.

        New calls raise InvalidUsageError at once; close() first waits for calls already
        running on other threads to return, Handle.wait() included (each bounded by its
        deadlines), and for a close() already destroying on another thread, then
        destroys, which fails the async ops still in flight (blocks at most ~2 s more).
        Unwaited handles are settled: an op that had finished is waited first (its
        wait() then returns its result or raises its error); an op still in flight
        is failed by the destroy and then waited, which frees it, and its wait()
        raises InvalidUsageError. Either way the handles let go of their tensors.
        The other peers' next collective reports PeerLostError until they call
        update_topology().
        """
        self._gate.close()

    def __enter__(self) -> "Communicator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        gate = getattr(self, "_gate", None)
        if gate is None or gate.destroyed or gate.closed:
            return  # closed (or never created); an interrupted call's own close runs on its thread
        try:
            close_unclosed(self, f"ferry.Communicator (master {getattr(self, 'master', None)!r})")
        except Exception:  # interpreter shutdown: the library may already be gone
            pass

    def __repr__(self) -> str:
        if self._gate.closed:
            return f"<ferry.Communicator master={self.master!r} closed>"
        try:
            return (f"<ferry.Communicator master={self.master!r} group={self.peer_group} "
                    f"rank={self.rank}/{self.world_size}>")
        except InvalidUsageError:
            return f"<ferry.Communicator master={self.master!r} not connected>"

