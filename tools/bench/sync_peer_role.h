// The peer role of ferry-bench --workload sync: a holder or the newcomer of a
// shared-state sync, through the public C API only.
//
// Per size: the state is one page-aligned buffer of `bytes`, declared as
// --tensors tensors ("t0000", ...) of --dtype. Holders fill it with the
// holders' content (sync_content.h) and sync with FERRY_SYNC_ENFORCE_POPULAR
// at revisions 1, 2, ...; the newcomer fills it with different bytes and syncs
// FERRY_SYNC_RECEIVE_ONLY, asking for --compression. Before every sync but the
// first the newcomer flips one byte of every tensor, so every sync moves the
// whole state. Each of W warmup + I timed iterations passes the barrier, then
// times ferry_sync_shared_state from call to return.
//
// One JSON line per size on stdout:
//   {"impl":"ferry-sync","role":"newcomer"|"holder","peer_index":2,"world":3,"bytes":N,
//    "tensors":T,"compression":0,"times_s":[...],"sync_duration_s":[...],
//    "bytes_received":[...],"bytes_sent":[...],"tensors_changed":[...],"cpu_s":0.5,
//    "hashes":["<xxh3 of the whole state after each timed sync>"]}
// (one entry per timed iteration; a holder's state never changes, so its
// hashes are the holders' content every time.)
#pragma once

#include "bench_args.h"

namespace ferry::bench {

// Returns the exit status: 0 ok, 1 a ferry call failed, 3 the state was not the holders' after a sync.
int run_sync_peer(const BenchArgs& args);

}  // namespace ferry::bench
