#!/usr/bin/env python3
"""Streaming DiLoCo over ferry: the model's layers are split into F fragments, and every H/F
inner steps one fragment's pseudo-gradient is all-reduced (all_reduce_async) while training
goes on; it is applied H/F inner steps later, and the local fragment is mixed with the new
outer one (alpha * local + (1 - alpha) * outer). Each fragment syncs once per H inner steps,
so the bytes are those of DiLoCo, spread evenly over time instead of in one burst, and hidden
behind compute. The algorithm is the library's: ferry.diloco.DiLoCo(..., fragments=F,
overlap=True, merge="mix"). Joins, deaths and bit-identical outer weights as in diloco.py.

  examples/python/streaming_diloco.py --master 127.0.0.1:48148 --fragments 3 --inner-steps 30 \\
      --shard 0 --num-shards 4 --min-peers 4
"""

from __future__ import annotations

from diloco import run_diloco
from peer_cli import Peer, parser


def main() -> None:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--fragments", type=int, default=3, help="F: fragments (whole layers each)")
    p.add_argument("--merge", choices=["progress", "mix"], default="mix",
                   help="how the local fragment meets the delayed outer one (see ferry.diloco)")
    p.add_argument("--alpha", type=float, default=0.5, help="local share for --merge mix")
    args = p.parse_args()
    run_diloco(Peer(args), fragments=args.fragments, overlap=True, merge=args.merge, alpha=args.alpha)


if __name__ == "__main__":
    main()
