// The sync workload's baseline: the same bytes over plain TCP between two
// processes placed like a holder and the newcomer, timed the same way (from
// the receiver's first connect to its last byte), so "sync / tcp" says what
// the sync path costs over what the network and the kernel can do.
//
// tcp-source (--role tcp-source --bind-host H): listens on H:0, prints
// "tcp-source listening on H:PORT", and serves each connection's requests
// until it closes; runs until stopped. A request is three little-endian u64:
// (total, offset, length). length 0 means "prepare a state of `total` bytes"
// (the holders' content, sync_content.h), answered with one byte once ready;
// otherwise it sends bytes [offset, offset + length) of that state.
//
// tcp-sink (--role tcp-sink --tcp-source ADDR --connections K): per size,
// asks the source to prepare, then W warmup + I timed iterations of: K
// threads each connect and fetch 1/K of the state straight into its buffer.
// One JSON line per size:
//   {"impl":"tcp","connections":K,"bytes":N,"times_s":[...],"hashes":["<xxh3 of the state>"]}
// With --cc both ends set TCP_CONGESTION.
#pragma once

#include "bench_args.h"

namespace ferry::bench {

int run_tcp_source(const BenchArgs& args);
int run_tcp_sink(const BenchArgs& args);

}  // namespace ferry::bench
