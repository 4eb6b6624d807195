"""Membership of :class:`ferry.Communicator`: joining, topology votes, the waits for a world,
and what the last topology says (world sizes, rank, ring, links, labels).

Mixed into Communicator (as gather.GatherCalls is): the calls go through its CallGate
(``_gate``) and its blocking-call machinery (``_blocking``); Communicator documents the
threads, deadlines and Ctrl-C rules every call here follows.
"""

from __future__ import annotations

import ctypes
from typing import List, Optional

from . import _lib
from .durations import Duration, millis
from .errors import InvalidArgumentError
from .legacy import warn_deprecated
from .links import Link, LinkMatrix
from .params import uint

__all__ = ["MembershipCalls"]

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
_ATTR_NEXT_LINK_RELAY = 9
_ATTR_RELAYED_BYTES = 10


class MembershipCalls:
    """The membership calls and topology attributes of :class:`ferry.Communicator` (mixed in)."""

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

    def wait_for_peers(self, group_world_size: int,
                       timeout_s: Optional[float] = None) -> None:
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
    def next_link_relay(self) -> int:
        """The peer_id relaying this peer's ring link to the next peer; 0 when the link is direct."""
        return self._attribute(_ATTR_NEXT_LINK_RELAY, "next_link_relay")

    @property
    def relayed_bytes(self) -> int:
        """Bytes this peer forwarded as a relay for others' ring links since it was created."""
        return self._attribute(_ATTR_RELAYED_BYTES, "relayed_bytes")

    def _attribute(self, attribute: int, name: str) -> int:
        value = ctypes.c_int64()
        with self._gate.call(name) as ptr:
            code = _lib.lib().ferry_comm_get_attribute(ptr, attribute, ctypes.byref(value))
        _lib.check(code, name)
        return int(value.value)
