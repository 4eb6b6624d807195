"""A peer of a ferry run (``ferry_comm``): joining, topology votes and all-reduces."""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any, Callable, Collection, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union

from . import _lib
from ._exit import close_unclosed, track_communicator
from .async_op import AsyncOp
from .call_gate import CallGate
from .completion_watch import CompletionWatch
from .dtypes import DType, ReduceOp, parse_op, parse_quant
from .durations import Duration, from_millis, millis
from .errors import InvalidArgumentError, InvalidUsageError
from .gather import GatherCalls
from .handle import Handle, OpInfo
from .issue_queue import IssueQueue
from .legacy import legacy_call, warn_deprecated
from .links import Link, LinkMatrix
from .params import comm_params, uint
from .shared_state import SyncInfo, SyncStrategy, sync_shared_state
from .tensors import plan_allreduce, plan_many

__all__ = ["Communicator"]

Op = Union[str, ReduceOp]

#: The caller's tensor type (torch.Tensor, numpy.ndarray): the all-reduces return what they were given.
T = TypeVar("T")
R = TypeVar("R")

# ferry_attribute
_ATTR_GLOBAL_WORLD_SIZE = 0
_ATTR_GROUP_WORLD_SIZE = 1
_ATTR_NUM_GROUPS = 2
_ATTR_LARGEST_GROUP_SIZE = 3
_ATTR_RANK = 4
_ATTR_PEER_GROUP = 5
_ATTR_PEER_ID = 6
_ATTR_EPOCH = 7
_ATTR_SHARED_MEMORY_LANES = 8


class Communicator(GatherCalls):
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
    the seconds a close may take) with a ResourceWarning, as an unclosed file. Tensors are borrowed only during a blocking call;
    an async op borrows them until its Handle is waited (see Handle).

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
            such peers are never ring neighbours (False: it listens; ferry.h has the rest).

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
            master_connect_timeout=master_connect_timeout, dial_out_only=dial_out_only)
        ptr = _lib.CommPtr()
        _lib.check(lib.ferry_comm_create(ctypes.byref(params), ctypes.byref(ptr)), "ferry_comm_create")
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

    def _attribute(self, attribute: int, name: str) -> int:
        value = ctypes.c_int64()
        with self._gate.call(name) as ptr:
            code = _lib.lib().ferry_comm_get_attribute(ptr, attribute, ctypes.byref(value))
        _lib.check(code, name)
        return int(value.value)

    def _fill_desc(self, desc: _lib.AllreduceDesc, dtype: DType, op: Op, tag: int, quant: Optional[str]) -> None:
        desc.dtype = int(dtype)
        desc.op = int(parse_op(op))
        desc.tag = uint("tag", tag, 64)
        desc.quant = parse_quant(quant)
        desc.quant_block = 0  # the library's default block (256 elements)

    # ------------------------------------------------------------------ membership

    def connect(self) -> None:
        """Collective with the group: joins the run and waits until this peer is admitted.

        Admission is immediate in an empty group; otherwise it happens when the
        group's accepted peers next call :meth:`update_topology`. Blocks at most
        master_connect_timeout to reach a master that does not answer yet (a refused
        address: 10 tries, ~5.5 s; an unresolvable name: one), then timeout to be
        admitted (GIL released). Raises ConnectError (master unreachable, naming its
        address), TimeoutError (not admitted in time; calling connect() again
        retries the wait), InvalidUsageError (already connected), MasterLostError,
        KickedError, ProtocolError.
        """
        self._blocking("connect", lambda ptr: _lib.check(_lib.lib().ferry_connect(ptr), "connect"))

    def update_topology(self) -> None:
        """Collective over the group's accepted peers: admits pending peers, drops lost ones,
        rebuilds the ring; returns once every member has its links.

        Call it on every survivor after a retryable error (PeerLostError, TimeoutError).
        Not allowed while async ops are in flight (InvalidUsageError). Blocks at most
        timeout per attempt (GIL released). Raises TimeoutError, PeerLostError (a member
        died during the vote: call again), MasterLostError, KickedError.
        """
        self._blocking("update_topology",
                       lambda ptr: _lib.check(_lib.lib().ferry_update_topology(ptr), "update_topology"))

    def optimize_topology(self) -> None:
        """update_topology that re-measures every link and takes the best ring order
        (``ferry_optimize_topology``): collective, same errors and bounds. For a boundary of
        your choosing (say every few hundred outer steps); plain votes already reorder for a
        ring at least 25 % faster."""
        self._blocking("optimize_topology",
                       lambda ptr: _lib.check(_lib.lib().ferry_optimize_topology(ptr), "optimize_topology"))

    def peers_pending(self) -> int:
        """Collective over the group's accepted peers: how many peers wait to be admitted.

        Every caller gets the same answer, so all can decide alike whether to call
        update_topology(). Blocks at most timeout. Raises as update_topology().
        """
        pending = ctypes.c_uint32()
        self._blocking("peers_pending", lambda ptr: _lib.check(
            _lib.lib().ferry_peers_pending(ptr, ctypes.byref(pending)), "peers_pending"))
        return int(pending.value)

    def wait_for_world(self, world_size: int, *, timeout: Optional[Duration] = None) -> None:
        """Waits until this peer's group holds at least ``world_size`` peers
        (``ferry_wait_for_world``): call it once after connect() on every peer started together.

        A group already that large returns at once, without a vote (so does a newcomer whose
        admission made it that large). Otherwise it is a collective over the group's accepted
        peers, all passing the same size: a topology vote that the master holds until enough
        newcomers wait, then admits them (no polling). Blocks at most ``timeout`` (seconds or a
        timedelta, at most a day; default: the communicator's ``timeout``) plus the admission's
        own bound, then raises ferry.TimeoutError saying how large the group is; raises what
        update_topology() raises.
        """
        size = uint("world_size", world_size, 32)
        if size == 0:
            raise InvalidArgumentError("world_size must be at least 1")
        # 0: the communicator's timeout
        timeout_ms = 0 if timeout is None else millis("timeout", timeout, most=86400, positive=True)
        self._blocking("wait_for_world", lambda ptr: _lib.check(
            _lib.lib().ferry_wait_for_world(ptr, size, timeout_ms), "wait_for_world"))

    def wait_for_peers(self, group_world_size: int, timeout_s: Optional[float] = None) -> None:
        """Deprecated (the 0.3 name): :meth:`wait_for_world`, the C call's name (``timeout_s`` is its ``timeout``)."""
        warn_deprecated("Communicator.wait_for_peers(n, timeout_s=...) is now wait_for_world(n, timeout=...)")
        self.wait_for_world(group_world_size, timeout=timeout_s)

    # Attributes are as of the last topology this peer joined; they never block.
    # Before connect() they raise InvalidUsageError.

    @property
    def world_size(self) -> int:
        """Peers in this peer's ring: the world its collectives run over (torch's meaning).

        Up to 0.3 this was the run's total, now :attr:`global_world_size`."""
        return self._attribute(_ATTR_GROUP_WORLD_SIZE, "world_size")

    @property
    def global_world_size(self) -> int:
        """Accepted peers of all groups of the run (``FERRY_ATTR_GLOBAL_WORLD_SIZE``)."""
        return self._attribute(_ATTR_GLOBAL_WORLD_SIZE, "global_world_size")

    @property
    def group_world_size(self) -> int:
        """Deprecated (the 0.3 name): :attr:`world_size`."""
        warn_deprecated("Communicator.group_world_size is now world_size")
        return self.world_size

    @property
    def timeout_ms(self) -> int:
        """Deprecated (the 0.3 name): :attr:`timeout`, in seconds."""
        warn_deprecated("Communicator.timeout_ms is now timeout, in seconds")
        return round(self.timeout * 1000)

    @property
    def rank(self) -> int:
        """This peer's position in its ring, 0..world_size-1."""
        return self._attribute(_ATTR_RANK, "rank")

    @property
    def num_groups(self) -> int:
        """Groups with at least one accepted peer."""
        return self._attribute(_ATTR_NUM_GROUPS, "num_groups")

    @property
    def largest_group_size(self) -> int:
        """The largest group's world size."""
        return self._attribute(_ATTR_LARGEST_GROUP_SIZE, "largest_group_size")

    @property
    def peer_group(self) -> int:
        """This peer's group id."""
        return self._attribute(_ATTR_PEER_GROUP, "peer_group")

    @property
    def peer_id(self) -> int:
        """This peer's id, assigned by the master and unique in the run (what :meth:`ring` lists)."""
        return self._attribute(_ATTR_PEER_ID, "peer_id")

    @property
    def epoch(self) -> int:
        """The ring's epoch: the same on every member, and it changes with every topology vote."""
        return self._attribute(_ATTR_EPOCH, "epoch")

    def ring(self) -> List[int]:
        """The :attr:`peer_id` of each member of this peer's ring, in ring order
        (``ring()[rank] == peer_id``; the same list on every member): who a collective
        runs with. As of the last topology joined; does not block; InvalidUsageError
        before connect."""
        count = ctypes.c_size_t(0)
        ids = (ctypes.c_uint64 * 0)()
        while True:
            with self._gate.call("ring") as ptr:
                code = _lib.lib().ferry_comm_ring(ptr, ids, len(ids), ctypes.byref(count))
            _lib.check(code, "ring")
            if count.value <= len(ids):
                return [int(i) for i in ids[:count.value]]
            ids = (ctypes.c_uint64 * count.value)()  # another thread's vote may grow it again: loop

    def links(self) -> LinkMatrix:
        """The group's link matrix as the master holds it (``ferry_comm_link_matrix``): one
        :class:`Link` per measured ordered pair of members (goodput, RTT, retransmissions,
        age); ``print(comm.links())`` shows a table. Blocks for one round trip to the master
        (at most timeout); TimeoutError, MasterLostError; InvalidUsageError before connect."""
        count = ctypes.c_size_t(0)
        entries = (_lib.LinkInfoC * 0)()
        while True:
            for entry in entries:
                entry.struct_size = ctypes.sizeof(_lib.LinkInfoC)
            self._blocking("links", lambda ptr: _lib.check(
                _lib.lib().ferry_comm_link_matrix(ptr, entries, len(entries), ctypes.byref(count)), "links"))
            if count.value <= len(entries):
                return LinkMatrix(Link.from_c(e) for e in entries[:count.value])
            entries = (_lib.LinkInfoC * count.value)()  # a report may add entries meanwhile: loop

    def set_label(self, label: str) -> None:
        """The line the master shows beside this peer on ``/status`` (its ``label``) and the
        dashboard (``ferry_comm_set_label``): at most 128 characters of printable ASCII, "" for
        none. Display only and fire and forget: it never blocks and nothing waits for it; set
        before connect() it goes out once the master welcomes this peer. DiLoCo's time-boxed
        mode sets it to each outer step's work. InvalidArgumentError for a label the master
        would refuse (too long, a character outside printable ASCII)."""
        if not isinstance(label, str):
            raise InvalidArgumentError(f"set_label: label must be a str, got {type(label).__name__}")
        if "\0" in label:  # the C string would end there: say so rather than send a shorter label
            raise InvalidArgumentError("set_label: a peer label holds printable ASCII only; it holds a NUL")
        with self._gate.call("set_label") as ptr:
            code = _lib.lib().ferry_comm_set_label(ptr, label.encode("utf-8"))
        _lib.check(code, "set_label")

    @property
    def shared_memory_lanes(self) -> int:
        """How many of this peer's ring connections (out plus in) go through shared memory."""
        return self._attribute(_ATTR_SHARED_MEMORY_LANES, "shared_memory_lanes")

    @property
    def last_info(self) -> Optional[OpInfo]:
        """The OpInfo of the last all_reduce / all_reduce_many that succeeded on *this thread*
        (None before the first)."""
        return getattr(self._local, "info", None)

    @property
    def closed(self) -> bool:
        return self._gate.closed

    # ------------------------------------------------------------------ all-reduce

    @legacy_call(positional=("op", "tag", "out", "quant"))
    def all_reduce(self, tensor: T, *, op: Op = "sum", tag: int = 0, out: Optional[T] = None,
                   quant: Optional[str] = None) -> T:
        """Collective: reduces ``tensor`` element-wise over the group and returns the result.

        In place when ``out`` is None: the result is written into ``tensor``'s own
        memory (zero-copy) and ``tensor`` is returned. With ``out`` (same dtype and
        shape) the result goes to ``out``, which is returned, and ``tensor`` is
        only read. Every peer gets bit-identical results.

        Args:
            tensor: a contiguous torch.Tensor (CPU, or CUDA staged through host memory)
                or C-contiguous numpy.ndarray of a supported dtype.
            op: "sum" (the default, as in ferry.h and torch.distributed), "avg" (the sum
                divided by the group's world size: pass it for gradients and DiLoCo
                pseudo-gradients), "prod", "min", "max", any case, or a ReduceOp.
            tag: names the operation; must match on every peer (0..2**64-1).
            out: optional output tensor/array.
            quant: None (full precision, default) or the wire quantization: "u8", "i8",
                "u4" (affine min-max per 256-element block, re-encoded at every hop),
                "f16", "bf16"; or the integer-domain modes "i8h", "i4h" (a scale shared
                per block, integers summed exactly; sum and avg only; error grows as N,
                not N^2; the result does not depend on the ring order) and "i8h-sr",
                "i4h-sr" (the same with unbiased stochastic rounding). Lossy, float
                dtypes only (f16/bf16 wire: f32/f64 data only; else InvalidArgumentError),
                must match on every peer; results stay bit-identical on every peer.
                Error bounds: ferry.h, ``ferry_quant``.

        Blocks until the master commits or aborts (at most timeout to start,
        progress_timeout without progress, 2 x timeout to commit); the GIL is
        released meanwhile. The buffers are borrowed only during the call.
        On failure ``tensor`` (in place) or ``out`` holds unspecified values,
        possibly partial sums; with ``out`` the input is intact and the call can
        be retried as is. Raises InvalidArgumentError, InvalidUsageError (not
        connected, closed), MismatchError, PeerLostError, TimeoutError,
        MasterLostError, KickedError, ProtocolError.
        """
        plan = plan_allreduce(tensor, out)
        desc = _lib.AllreduceDesc.from_buffer_copy(self._desc)
        self._fill_desc(desc, plan.dtype, op, tag, quant)
        info = _lib.OpInfoC.empty()
        plan.wait_copied()  # a CUDA input: ferry's copy to host memory, not the caller's stream
        # The closure holds plan, desc and info: an interrupted call still borrows them.
        self._blocking("all_reduce", lambda ptr: _lib.check(_lib.lib().ferry_allreduce(
            ptr, plan.send_ptr, plan.recv_ptr, plan.count, ctypes.byref(desc), ctypes.byref(info)), "all_reduce"))
        self._local.info = OpInfo.from_c(info)
        return plan.finish()

    def barrier(self) -> None:
        """Collective: returns once every peer of the group has called it.

        Agreed through the master like an all-reduce (all-or-nothing, the same deadlines);
        a peer calling something else here is a MismatchError on every peer. Raises
        InvalidUsageError (not connected, closed), MismatchError, PeerLostError,
        TimeoutError, MasterLostError, KickedError.
        """
        self._blocking("barrier", lambda ptr: _lib.check(_lib.lib().ferry_barrier(ptr), "barrier"))

    @legacy_call(positional=("root",))
    def broadcast(self, tensor: T, *, root: int = 0) -> T:
        """Collective: ``tensor``'s bytes on the peer of rank ``root`` arrive in ``tensor``
        on every peer, bit for bit (in place), and ``tensor`` is returned.

        Every peer passes a tensor of the same size in bytes and the same ``root`` (else
        MismatchError on every peer). It runs as an all-reduce with the same guarantees
        and deadlines (ferry.h, ferry_broadcast); on failure the root's tensor is intact
        and the others' hold unspecified values. ``tensor``: a contiguous torch.Tensor
        (CPU, or CUDA staged through host memory) or C-contiguous, writable numpy.ndarray.
        Raises InvalidArgumentError (root not a rank, a bad tensor), InvalidUsageError,
        MismatchError, PeerLostError, TimeoutError, MasterLostError, KickedError.
        """
        plan = plan_allreduce(tensor)
        root = uint("root", root, 32)
        info = _lib.OpInfoC.empty()
        plan.wait_copied()
        # The closure holds plan and info: an interrupted call still borrows them.
        self._blocking("broadcast", lambda ptr: _lib.check(_lib.lib().ferry_broadcast(
            ptr, plan.recv_ptr, plan.count * plan.dtype.itemsize, root, ctypes.byref(info)), "broadcast"))
        self._local.info = OpInfo.from_c(info)
        return plan.finish()

    @legacy_call(positional=("op", "tag", "out", "quant"))
    def all_reduce_async(self, tensor: T, *, op: Op = "sum", tag: int = 0, out: Optional[T] = None,
                         quant: Optional[str] = None) -> Handle[T]:
        """Issues the all-reduce described for :meth:`all_reduce` (``op`` defaults to "sum")
        and returns at once.

        It progresses on the library's threads; ``handle.wait()`` returns its OpInfo
        (``handle.output`` is the result tensor). The library borrows ``tensor`` and
        ``out`` until the handle is waited: do not touch them before. The handle (and
        the communicator, until then) keeps them alive. Issue async ops in the same
        order on every peer. update_topology() is refused while ops are in flight.
        Raises at once only InvalidArgumentError, InvalidUsageError, MasterLostError,
        KickedError; everything else is raised by ``wait()``.

        CUDA tensors: returns without waiting for the device. ferry copies the input on its
        own stream after the work already enqueued on the caller's current stream, and its
        issue thread issues the C op once the copy has landed (errors of that issue,
        including those listed above, are then raised by ``wait()``); ``wait()`` makes the
        caller's current stream wait for the result's copy back. See ferry.cuda_stage.
        """
        plan = plan_allreduce(tensor, out)
        desc = _lib.AllreduceDesc.from_buffer_copy(self._desc)
        self._fill_desc(desc, plan.dtype, op, tag, quant)
        return self._start_async("all_reduce_async", plan, lambda ptr, op_ptr: _lib.lib().ferry_allreduce_async(
            ptr, plan.send_ptr, plan.recv_ptr, plan.count, ctypes.byref(desc), ctypes.byref(op_ptr)),
            watch=plan.on_device)

    @legacy_call(positional=("op", "tag", "outs", "max_in_flight", "quant"))
    def all_reduce_many(self, tensors: Sequence[T], *, op: Op = "sum", tag: int = 0,
                        outs: Optional[Sequence[Optional[T]]] = None, max_in_flight: int = 4,
                        quant: Optional[str] = None) -> List[T]:
        """Collective: all-reduces several tensors (``op`` as for :meth:`all_reduce`, default
        "sum"), retrying through peer failures.

        Wraps ``ferry_allreduce_multiple_with_retry``: the jobs are issued in list
        order with at most ``max_in_flight`` in flight (0 means 4); job ``i`` has tag
        ``tag + i``. When a peer is lost or a transfer times out (PeerLostError /
        TimeoutError), every surviving peer stops, votes a new topology together
        (update_topology) and issues the unfinished jobs again in the new world, until
        all succeed. It gives up with PeerLostError when the group shrinks below two
        peers or after 16 rounds; any other error (MismatchError, MasterLostError, ...)
        is raised at once. In-place tensors are copied aside by the library and
        restored before each retry, so results are always those of one clean world
        (memory: one extra copy of each in-place tensor). ``last_info`` sums bytes and
        time over every attempt; its world_size is the final world.

        Call it as a unit on every peer, with the same tensors in the same order, and
        no async ops in flight (InvalidUsageError). Blocks for as long as the
        operations and votes take, each under the communicator's deadlines (GIL
        released). Returns the output tensors (``tensors`` themselves, or ``outs``).
        """
        plans = plan_many(tensors, outs)
        max_in_flight = uint("max_in_flight", max_in_flight, 32)
        uint("tag", tag, 64)
        if len(plans) and tag + len(plans) - 1 >= 1 << 64:
            raise InvalidArgumentError("tag + len(tensors) - 1 overflows 64 bits")
        jobs = (_lib.AllreduceJob * len(plans))()
        for i, plan in enumerate(plans):
            job = jobs[i]
            ctypes.memmove(ctypes.addressof(job), ctypes.addressof(self._job), ctypes.sizeof(job))
            job.send, job.recv, job.count = plan.send_ptr, plan.recv_ptr, plan.count
            self._fill_desc(job.desc, plan.dtype, op, tag + i, quant)
        info = _lib.OpInfoC.empty()
        for plan in plans:
            plan.wait_copied()
        # The closure holds jobs, plans and info: an interrupted call still borrows them.
        self._blocking("all_reduce_many", lambda ptr: _lib.check(_lib.lib().ferry_allreduce_multiple_with_retry(
            ptr, jobs, len(plans), max_in_flight, ctypes.byref(info)), "all_reduce_many"))
        self._local.info = OpInfo.from_c(info)
        return [plan.finish() for plan in plans]

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

