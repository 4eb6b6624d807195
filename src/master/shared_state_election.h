// The master's shared-state election: from every member's sync_begin to a
// plan per member, or a reason to abort. A pure function, unit-tested alone.
//
// Rules (docs/design.md, "Shared state"):
//  - Every member declares the same tensors (names, dtypes, counts, and the
//    allow-inequality flag); tensors are matched by name, in name order.
//  - Contributors are the members not receive-only. Their highest revision T
//    is the sync's revision, and it must be the group's last revision + 1
//    (any value for the group's first sync). Contributors at T are
//    *eligible*; those behind only receive, like receive-only members.
//  - Per tensor: if eligible send-only members disagree, the lowest peer id
//    keeps its bytes and the others are kicked; otherwise a send-only
//    member's bytes win; otherwise the most common bytes among the eligible
//    win (ties: the bytes of the lowest peer id). Tensors that allow
//    inequality are never compared or moved.
//  - Members whose bytes differ from the winner fetch them from every
//    eligible member holding them that accepts connections; everyone ends at
//    revision T. When only dial-out-only members hold them, the sync aborts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "wire/messages.h"

namespace ferry::master {

struct SyncCandidate {
  uint64_t peer_id = 0;
  wire::PeerAddress address;
  wire::SyncBegin begin;
  bool serves = true;  // false: it accepts no connection (dial_out_only), so no fetcher is sent to it
};

struct ElectionOutcome {
  Status status;                           // not ok: abort the sync for everyone
  std::vector<uint64_t> kick;              // conflicting send-only members
  std::string kick_reason;
  uint64_t revision = 0;                   // the group's revision after a successful sync
  std::map<uint64_t, wire::SyncPlan> plans;  // by peer id
};

ElectionOutcome elect_shared_state(const std::vector<SyncCandidate>& candidates, bool group_has_revision,
                                   uint64_t group_revision);

}  // namespace ferry::master
