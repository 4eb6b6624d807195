// The master's records: what its state machine (master_state.h) knows of
// each connection, peer, group, proposal and collective. Plain data; the
// rules that change them are in master_state.h and the files of its jobs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "master/link_matrix.h"
#include "master/probe_plan.h"
#include "wire/messages.h"

namespace ferry::master {

using ConnId = uint64_t;
using PeerId = uint64_t;

// pending: waits for a vote to admit it; accepted: a member of its group's committed ring.
enum class Phase { pending, accepted };

// One per welcomed connection: the peer's own state and counts.
struct Peer {
  PeerId id = 0;
  ConnId conn = 0;
  uint32_t group = 0;
  wire::RingMember endpoint;
  uint32_t connections = 0;
  Phase phase = Phase::pending;
  std::string source;              // the address its connection came from
  uint32_t open_collectives = 0;   // records in its group that hold its begin
  uint32_t open_syncs = 0;         // ... of which shared-state syncs
  uint32_t silent_link_ms = 0;     // its hello's: when it answers a proposal at the latest
  bool dial_out_only = false;      // its hello's: it accepts no connection, so its links are dialed from its side
                                   // (or the master's dial to it went unanswered: reachability_check_ms)
  bool checking_reachability = false;  // the master's dial to it is out: not yet offered to its group
  const char* voted_in = "";       // the call of its last vote or pending query, for messages
  uint64_t joined_ms = 0;          // on the state's clock: its hello, and its last message
  uint64_t heard_ms = 0;
  uint64_t collectives_ok = 0;     // verdicts of collectives it began
  uint64_t collectives_failed = 0;
  std::string label;               // its peer_label: shown on /status, read by nothing that decides
};

// A ring offered to its members (a topology), until it commits or is superseded.
struct Proposal {
  uint64_t epoch = 0;
  std::vector<PeerId> members;
  std::vector<uint8_t> receiver_dials;  // as sent (wire::Topology): who dials each link
  std::vector<PeerId> relays;           // as sent: the relay of each relayed link, 0 elsewhere
  std::map<PeerId, wire::TopologyReady> answers;
  size_t failed_answers = 0;  // of `answers`, those whose code is not 0
  uint64_t started_ms = 0;
  // Once every link is up (so every member proved it answers), the pairs
  // nobody measured are probed (probe_plan.h), round by round, before the
  // commit: no collective runs on a link while it is probed, because none
  // runs before the commit. If what they found calls for another ring
  // order (ring_choice.h), that order is proposed at once; else it commits.
  bool probing = false;
  bool optimize = false;  // any better order wins, not only one ring_reorder_gain better
  std::vector<ProbeRoundPlan> probe_rounds;
  size_t probe_round = 0;            // the round in flight
  std::set<PeerId> probe_waiting;    // its members yet to answer
  uint64_t probe_started_ms = 0;
  uint64_t probe_round_started_ms = 0;
};

// Lives only while the ring it began on stands (a commit, a renewal or a
// lost member clears them all), so its members are the group's ring.
struct Collective {
  std::map<PeerId, wire::CollectiveBegin> begins;        // what every kind must agree on
  std::map<PeerId, wire::SyncBegin> sync_begins;         // shared-state syncs only
  std::optional<uint64_t> elected_revision;              // a sync's revision, set when planned
  std::map<PeerId, wire::SyncPlan> plans;                // a sync's plans, kept to judge a member's loss
  std::set<PeerId> ended_ok;
  bool go_sent = false;
  // On the state's clock, for the commit's debug line: the first begin, the go, the last ok end.
  uint64_t first_begin_ms = 0;
  uint64_t go_ms = 0;
  uint64_t last_end_ms = 0;
  // Set once aborted; members that begin later get the same verdict. The
  // record goes when every member has heard it.
  std::optional<wire::CollectiveResult> verdict;
};

// A peer group: its own ring, epochs, votes, proposal, collectives and link matrix.
struct Group {
  uint32_t id = 0;
  uint64_t epoch = 0;          // of the committed ring
  std::vector<PeerId> ring;    // accepted members, ring order; lost ones removed
  bool broken = false;         // a member was lost since the commit
  std::vector<PeerId> waiting; // pending peers, in arrival order
  std::set<PeerId> topology_votes;
  bool links_broken_vote = false;  // some voter's links failed: rebuild even if nothing else changed
  bool optimize_vote = false;      // some voter asked to re-measure and re-order (ferry_optimize_topology)
  // ferry_wait_for_world: the vote waits until members and newcomers number vote_min_world
  // (the largest any voter asked), or until vote_hold_until_ms (the earliest any voter allowed).
  uint32_t vote_min_world = 0;
  uint64_t vote_hold_until_ms = UINT64_MAX;
  std::set<PeerId> pending_queries;
  std::optional<Proposal> proposal;
  std::map<uint32_t, Collective> collectives;  // open ones, by seq
  // A collective of this epoch failed: members may since have issued different
  // numbers of collectives (each stops at its own failure), which only the next
  // vote realigns, so the calls' order cannot be compared until then.
  bool failed_in_epoch = false;
  std::optional<uint64_t> shared_revision;      // of the last committed shared-state sync
  // Members known to hold shared_revision (those of its sync, or who reported it when
  // resuming). When the last one leaves, the revision is forgotten: a state no member
  // holds cannot be required of the next sync (it would refuse every sync forever).
  std::set<PeerId> revision_holders;
  uint32_t reroutes = 0;  // proposals re-ordered around failed links since the last commit
  LinkMatrix links;       // what its members measured of the links between them
  // Its rings may join pairs neither end can dial, by a simultaneous open (link_dialers.h):
  // set by placeable() only when no ring of direct links holds every member, since a
  // punch that fails (a `closed` host drops every SYN) costs a round.
  bool punching = false;
  // And pairs that cannot punch either, through a third member (relay_choice.h): set by
  // placeable() only when even punching leaves someone out.
  bool relaying = false;
  std::vector<PeerId> relays;  // the committed ring's (Proposal::relays): 0, or the relay of link i
  // Set while the group is rebuilt from resume hellos; gone at its next commit.
  struct Resume {
    uint64_t started_ms = 0;
    std::vector<PeerId> last_ring;  // of the highest epoch reported (group.epoch)
    std::vector<PeerId> fresh;      // members that joined this master as newcomers before the first resume
    bool settled = false;
    std::vector<wire::SeqRange> committed;  // collectives of group.epoch some member saw committed
    std::map<PeerId, std::pair<uint64_t, std::vector<wire::SeqRange>>> awaiting;  // epoch and seqs, per member
  };
  std::optional<Resume> resume;
};

// A source address whose joiner was evicted: its hellos are refused until until_ms.
struct Backoff {
  uint64_t until_ms = 0;
  uint64_t last_eviction_ms = 0;
  uint32_t evictions = 0;
};

// One per connection, from its accept; `peer` once its hello was welcomed.
struct Connection {
  std::string remote_host;
  std::string nonce;  // of our auth_challenge
  std::optional<PeerId> peer;
};

}  // namespace ferry::master
