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
//    eligible member holding them that one end can dial (the fetcher the
//    holder, or else the holder the fetcher); only when there is none, from
//    those it may punch through to (net/punch.h). Everyone ends at revision T.
//    When no holder can be reached at all, the sync aborts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "master/link_dialers.h"
#include "wire/messages.h"

namespace ferry::master {

struct SyncCandidate {
  uint64_t peer_id = 0;
  wire::PeerAddress address;
  wire::SyncBegin begin;
};

// Who may connect to whom: `can_dial(from, to)`, `to` accepts `from`'s connections;
// `can_punch(a, b)`, a simultaneous open between them may get through.
struct SyncReach {
  CanDial can_dial;
  CanDial can_punch;
};

struct ElectionOutcome {
  Status status;                           // not ok: abort the sync for everyone
  std::vector<uint64_t> kick;              // conflicting send-only members
  std::string kick_reason;
  uint64_t revision = 0;                   // the group's revision after a successful sync
  std::map<uint64_t, wire::SyncPlan> plans;  // by peer id
};

ElectionOutcome elect_shared_state(const std::vector<SyncCandidate>& candidates, bool group_has_revision,
                                   uint64_t group_revision, const SyncReach& reach);

}  // namespace ferry::master
