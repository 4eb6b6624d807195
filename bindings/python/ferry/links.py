"""What peers measured of the links between them (``ferry_link_info``): :class:`Link`, :class:`LinkMatrix`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

__all__ = ["Link", "LinkMatrix"]


@dataclass(frozen=True)
class Link:
    """One ordered pair's measurement, as the master holds it (see ``ferry_link_info`` in ferry.h).

    goodput_bytes_per_s: what the collectives achieved over the link (payload over transfer time);
    delivery_rate_bytes_per_s, rtt_ms, retransmit_ratio: the link's TCP figures (0 over shared memory);
    connections: the TCP connections carrying its chunks (they adapt unless ``connections=`` pinned them).
    """

    from_peer: int
    to_peer: int
    shared_memory: bool
    goodput_bytes_per_s: float
    delivery_rate_bytes_per_s: float
    rtt_ms: float
    retransmit_ratio: float
    bytes: int
    age_s: float
    connections: int

    @classmethod
    def from_c(cls, c: Any) -> "Link":
        return cls(int(c.from_peer), int(c.to_peer), bool(c.shared_memory), float(c.goodput_bytes_per_s),
                   float(c.delivery_rate_bytes_per_s), float(c.rtt_ms), float(c.retransmit_ratio), int(c.bytes),
                   float(c.age_s), int(c.connections))


class LinkMatrix(List[Link]):
    """The measured links of a group, ordered by (from_peer, to_peer); ``str()`` is a table."""

    def __str__(self) -> str:
        if not self:
            return "no link measured yet"
        rows = [("from", "to", "carrier", "conns", "goodput MB/s", "delivery MB/s", "rtt ms", "retrans %", "age s")]
        for link in self:
            rows.append((str(link.from_peer), str(link.to_peer), "shm" if link.shared_memory else "tcp", str(link.connections),
                         f"{link.goodput_bytes_per_s / 1e6:.1f}", f"{link.delivery_rate_bytes_per_s / 1e6:.1f}",
                         f"{link.rtt_ms:.2f}", f"{100 * link.retransmit_ratio:.3f}", f"{link.age_s:.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in rows)
