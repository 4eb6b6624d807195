// What the master allows and how long it waits: every bound of its state
// machine (master_state.h), with the measurement or reason that chose it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::master {

struct MasterLimits {
  // Before a newcomer with a listener is offered to its group, the server dials
  // its advertised address once, with this deadline: a peer behind NAT or an
  // inbound firewall that does not answer is then treated as dial-out-only from
  // its first ring on, instead of costing its group a failed link set-up per
  // pair that cannot reach it (10-15 s each). 0: no check (the state admits at
  // once). MasterServerOptions turns it on; a bare MasterState has it off.
  uint32_t reachability_check_ms = 0;
  // Whether a pair neither end can dial may punch through (net/punch.h) before a relay
  // joins it. Off: straight to a relay, for networks known to drop both ends' SYNs
  // (symmetric NATs, hosts closed to everything inbound), where each punch costs a
  // proposal its 10 s connect timeout.
  bool punch = true;
  uint32_t min_heartbeat_timeout_ms = 100;
  uint32_t max_heartbeat_timeout_ms = 3'600'000;
  uint32_t default_heartbeat_timeout_ms = 10'000;
  // Joiners waiting for admission. Per source: the integration tests run up
  // to ~16 peers from one loopback address; twice that leaves room. Per group:
  // a run that starts all at once has every peer but the first pending, so a
  // thousand-peer start still fits, while one proposal stays bounded.
  uint32_t max_pending_per_source = 32;
  uint32_t max_pending_per_group = 1024;
  // Back-off of a source whose joiner was evicted because its links did not
  // form: 30 s, doubling per eviction, at most 10 min; forgotten after an
  // hour without one. The table holds at most max_backoff_sources addresses
  // (the oldest entry goes first).
  uint64_t backoff_initial_ms = 30'000;
  uint64_t backoff_max_ms = 600'000;
  uint64_t backoff_forget_ms = 3'600'000;
  size_t max_backoff_sources = 4096;
  // Collectives a peer may have open at the master. An honest peer has one
  // open per collective it has in flight, and the library does not cap those
  // (allreduce_with_retry keeps 4; a per-tensor loop over a large model a few
  // thousand); a record costs ~0.4 KB (200,000 grew the master by 82 MB).
  uint32_t max_open_collectives_per_peer = 16'384;
  // Shared-state syncs block their caller, so an honest peer has one per
  // thread; each begin may hold up to 4 MiB of tensor digests.
  uint32_t max_open_syncs_per_peer = 8;
  // How long a link measurement stays in its group's matrix unrefreshed.
  // Peers report after their collectives (at most once a second each), so a
  // link in use is never this old; one that is names a ring since changed.
  uint64_t link_max_age_ms = 600'000;
  // Active probe rounds per proposal (probe_plan.h; a peer is in at most one
  // probe per round): 8 cover every pair of a 4-peer group, or a newcomer's
  // pairs in a group of 5; the rest wait for later votes. Each round takes
  // at most ~3 s on the peers (link_probe.h).
  size_t max_probe_rounds = 8;
  // And no round starts once a vote has probed this long: its joiners wait
  // for the commit within their own deadline (ferry_connect's timeout_ms,
  // 60 s by default), so a vote's probing stays within ~12 s; pairs left over
  // are probed by the next proposal (a join, a leave, an optimize vote). (Six
  // three-regions peers joining a second apart timed out at 60 s without it.)
  uint64_t probe_budget_ms = 8'000;
  // Ring order (ring_choice.h): rings whose bottleneck is within this
  // fraction of the best compete on total RTT; and a group's ring is rebuilt
  // only for one whose bottleneck is at least ring_reorder_gain times its
  // own, or as fast with ring_reorder_gain times less total RTT (noise in
  // the measurements must not make rings thrash).
  double ring_rtt_tolerance = 0.05;
  // A member that has not answered a probe round by then is kicked: an
  // honest one answers within its dial and handshake deadlines (at most 3 s
  // each) plus its probe (at most 3 s).
  uint64_t probe_round_timeout_ms = 15'000;
  double ring_reorder_gain = 1.25;
  // false: rings keep the order peers arrived in, whatever the links (a
  // baseline for what ordering buys: ferry-master --ring-order arrival);
  // unreachable pairs are still avoided.
  bool order_rings_by_links = true;
  // A pair that could not connect is avoided for 30 s after its first
  // failure, doubling with each further one up to 10 min; then the next
  // vote probes it again (a rebuild of the ring: worth it only that rarely).
  uint64_t unreachable_retry_ms = 30'000;
  uint64_t unreachable_retry_max_ms = 600'000;
  // Failed links rerouted around before a proposal commits; past that,
  // disputes evict again (ring_verdict.h), so fakes cannot stall a vote.
  uint32_t max_reroutes = 4;
  // A joiner an accepted member blamed is heard before the verdict (its
  // answer may show a link to route around) until the deadline it gave in
  // its hello (hello.silent_link_ms, peer/link_setup.h: 15 s by default)
  // after the proposal, plus a second; at most this long. A fake that never
  // answers stalls the vote no longer than that, or its link timeout.
  uint64_t max_silent_link_ms = 20'000;
  // After a restart, how long a rebuilt group waits for the members of its
  // last ring before it settles without the missing ones. Members dial again
  // with a back-off of at most a second (peer/communicator.h), so a live one
  // is back well within this.
  uint64_t resume_settle_ms = 10'000;
};

}  // namespace ferry::master
