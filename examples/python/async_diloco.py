#!/usr/bin/env python3
"""Async DiLoCo over ferry: the outer all-reduce of step t runs (all_reduce_async) while the
inner steps of step t+1 run, and is applied one outer step late.

At the end of inner phase t+1 the peer waits for step t's averaged pseudo-gradient, applies it
with the outer Nesterov SGD, moves its local weights to the new outer weights plus the local
progress it made meanwhile (--merge progress) or mixes them (--merge mix), and issues step
t+1's pseudo-gradient; so communication hides behind a whole inner phase (H AdamW steps).
The algorithm is the library's: ferry.diloco.DiLoCo(..., overlap=True). Joins, deaths and
bit-identical outer weights as in diloco.py.

  examples/python/async_diloco.py --master 127.0.0.1:48148 --shard 0 --num-shards 4 --min-peers 4
"""

from __future__ import annotations

from diloco import run_diloco
from peer_cli import Peer, parser


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--merge", choices=["progress", "mix"], default="progress",
                   help="how the local weights meet the delayed outer weights (see ferry.diloco)")
    p.add_argument("--alpha", type=float, default=0.5, help="local share for --merge mix")
    args = p.parse_args()
    run_diloco(Peer(args), overlap=True, merge=args.merge, alpha=args.alpha)


if __name__ == "__main__":
    main()
