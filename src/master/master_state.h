// The master's brain: a single-threaded, deterministic state machine fed by
// connection events and wire messages, answering with effects (messages to
// send, connections to close). No sockets, no threads, and no clock of its
// own: the caller says what time it is (advance_clock), so the same inputs
// always give the same outputs and every rule is unit-testable.
//
// Membership, per peer group:
//   pending  --(accepted members all vote topology, or the group is empty)-->
//   in a proposal (every member dials its ring neighbours, reports ready) -->
//   accepted (the proposal committed: topology_done).
// A proposal that loses a member is re-proposed without it at once. One whose
// links do not all form is decided when the answers allow (ring_verdict.h:
// a peer is evicted only on corroboration, never on one peer's word). A link
// both ends say failed marks its ordered pair unreachable (link_matrix.h:
// retried after a back-off) and the members are proposed again in a ring
// that avoids every unreachable pair. When none exists, the fewest members
// that make one possible are left out (ring_choice.h): joiners wait for a
// later vote, accepted members are evicted saying why. Other culprits go at
// once and the rest are proposed again. Each retry drops a peer or a pair
// (at most max_reroutes of those per commit), so it terminates. A joiner
// left waiting costs a failed round only when a newcomer or an expired
// back-off makes a ring with it possible again.
//
// Insiders (peers that hold the run secret) are bounded too:
//  - Pending joiners are capped per group and per source address.
//  - A joiner evicted because its links did not form puts its source address
//    in back-off (doubling, capped, forgotten after a quiet spell): hellos
//    from it are refused until then, so fake joiners cannot stall a group
//    round after round. Keyed by address: an attacker with many addresses
//    still costs a round per address per back-off period (at most one link
//    timeout per round, whatever the number of fakes in it).
//  - A peer may hold a bounded number of collectives open (begun, not yet
//    decided); past that it is kicked (protocol). Groups left with no ring,
//    no joiner and no proposal are forgotten.
//
// Collectives (per committed epoch, numbered seq = 0, 1, ... in issue order):
//   every member sends collective_begin(seq); all agree -> collective_go to
//   all; each sends collective_end; all ok -> collective_result(ok) to all.
//   A disagreement, a failed end, or a lost member aborts the collective for
//   every member alike: success is all-or-nothing.
// Losing an accepted member marks its group's ring broken: collectives fail
// with peer_lost until the survivors vote a new topology.
//
// A master started again (master_resume.cpp): members that lost the old one
// dial again with a resume hello (their id, epoch, ring, shared-state
// revision, the collectives they saw committed and those awaiting a
// verdict). A group with no state here is rebuilt from them: its ring is the
// one of the highest epoch any member reports (epochs only grow, and a
// member holds one only once the old master committed it), less the members
// not back; it is broken, so collectives wait for a vote, which waits until
// the group settles: every member of that ring is back, or resume_settle_ms
// passed. Then each awaited collective is committed when some member saw it
// committed (a commit needs every member's ok end, so the others all await
// it) and aborted otherwise. Newcomers that formed the group on this master
// before the first resume (their epochs are below the old master's) stay,
// after the old ring's members. Resumes into a group this master committed
// at a higher epoch, or one that settled, are refused: those peers join
// again as newcomers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/log_throttle.h"
#include "core/run_secret.h"
#include "master/link_matrix.h"
#include "master/master_stats.h"
#include "master/probe_plan.h"
#include "master/ring_choice.h"
#include "master/ring_verdict.h"
#include "master/run_journal.h"
#include "master/run_view.h"
#include "wire/messages.h"

namespace ferry::master {

using ConnId = uint64_t;
using PeerId = uint64_t;

struct Effects {
  struct Send {
    ConnId conn;
    wire::Message message;
  };
  struct Close {
    ConnId conn;
    std::optional<wire::Message> last;  // e.g. the kick explaining why
    std::string reason;
  };
  // Set once per connection, when its hello is accepted: the handshake is over.
  struct SetSilenceDeadline {
    ConnId conn;
    uint32_t timeout_ms;
  };
  std::vector<Send> sends;
  std::vector<Close> closes;
  std::vector<SetSilenceDeadline> deadlines;
};

struct MasterLimits {
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

class MasterState {
 public:
  // With a secret, every peer must prove it holds it (and the master proves it back).
  // first_peer_id: the id of the first newcomer. A master started again must not
  // hand out ids its predecessor gave to members that will come back: the
  // server starts at the wall clock in ms (a predecessor that started earlier
  // gave out fewer ids than milliseconds passed since).
  explicit MasterState(MasterLimits limits = {}, std::optional<RunSecret> secret = std::nullopt,
                       uint64_t first_peer_id = 1);

  // `nonce`: fresh randomness from the caller (the state machine itself stays deterministic).
  void on_connected(ConnId conn, const std::string& remote_host, const std::string& nonce);
  void on_message(ConnId conn, const wire::Message& message);
  // The time, in ms on any monotonic clock; call before each event. It never
  // goes back (an earlier value is ignored). Back-off and the ages of link
  // measurements read it.
  void advance_clock(uint64_t now_ms);
  // Called now and then (the server: twice a second): deadlines that no
  // message would bring up (a probe round some member never answers).
  void on_tick(uint64_t now_ms);
  // The connection is gone (closed, silent, malformed traffic): drop its peer.
  void on_disconnected(ConnId conn, const std::string& reason);
  Effects take_effects();

  // Inspection (tests, logs).
  size_t connection_count() const { return connections_.size(); }
  size_t peer_count() const { return peers_.size(); }
  std::vector<PeerId> ring(uint32_t group) const;
  std::vector<PeerId> pending(uint32_t group) const;
  std::optional<uint64_t> shared_revision(uint32_t group) const;
  uint64_t epoch(uint32_t group) const;
  bool ring_broken(uint32_t group) const;
  // The group's link matrix as a query would get it now (empty for an unknown group).
  std::vector<wire::LinkEntry> link_matrix(uint32_t group);
  size_t group_count() const { return groups_.size(); }
  // When hellos from `host` are accepted again (0: they are now).
  uint64_t backoff_until(const std::string& host) const;
  // What it counted since it started (master_stats.h): verdicts, bytes, joins and leaves.
  const MasterStats& stats() const { return stats_; }
  // The run for the people watching it (run_view.h; master_view.cpp): O(peers
  // + links + open collectives). Non-const: stale link measurements expire first.
  RunView view();
  // The last events and collectives (run_journal.h).
  const RunJournal& journal() const { return journal_; }

 private:
  enum class Phase { pending, accepted };

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
    const char* voted_in = "";       // the call of its last vote or pending query, for messages
    uint64_t joined_ms = 0;          // on the state's clock: its hello, and its last message
    uint64_t heard_ms = 0;
    uint64_t collectives_ok = 0;     // verdicts of collectives it began
    uint64_t collectives_failed = 0;
  };

  struct Proposal {
    uint64_t epoch = 0;
    std::vector<PeerId> members;
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
    bool settling = false;  // evicting a proposal's culprits: one re-proposal afterwards, not one each
    uint32_t reroutes = 0;  // proposals re-ordered around failed links since the last commit
    LinkMatrix links;       // what its members measured of the links between them
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

  struct Backoff {
    uint64_t until_ms = 0;
    uint64_t last_eviction_ms = 0;
    uint32_t evictions = 0;
  };

  struct Connection {
    std::string remote_host;
    std::string nonce;  // of our auth_challenge
    std::optional<PeerId> peer;
  };

  void handle(Peer& peer, const wire::Hello& m);
  void handle(Peer& peer, const wire::TopologyVote& m);
  void handle(Peer& peer, const wire::TopologyReady& m);
  void handle(Peer& peer, const wire::PendingQuery& m);
  void handle(Peer& peer, const wire::CollectiveBegin& m);
  void handle(Peer& peer, const wire::SyncBegin& m);
  void begin_collective(Peer& peer, const wire::CollectiveBegin& m, const wire::SyncBegin* sync);
  void start_collective(Group& group, uint32_t seq);
  void handle(Peer& peer, const wire::CollectiveEnd& m);
  void handle(Peer& peer, const wire::Leave& m);
  void handle(Peer& peer, const wire::LinkReport& m);
  void handle(Peer& peer, const wire::LinkMatrixQuery& m);
  void handle(Peer& peer, const wire::ProbeDone& m);
  void on_hello(ConnId conn, const wire::Hello& hello);
  // Makes the connection's peer (welcomed, pending) with this id.
  Peer& add_peer(ConnId conn, const wire::Hello& hello, PeerId id, uint32_t heartbeat_timeout_ms);
  // master_resume.cpp
  void on_resume(ConnId conn, const wire::Hello& hello, uint32_t heartbeat_timeout_ms);
  void maybe_settle(Group& group);
  void dispatch(ConnId conn, const wire::Message& message);
  void drop_connection(ConnId conn, const std::string& reason);

  void kick(ConnId conn, Errc code, const std::string& reason);
  void remove_peer(PeerId id, const std::string& reason);
  void forget_revision_holder(Group& group, PeerId id);
  void send(PeerId id, wire::Message message);
  void send_all(const std::vector<PeerId>& ids, const wire::Message& message);

  void maybe_complete_votes(Group& group);
  // `order`: the members in the ring order to propose (empty: the ring, then
  // the joiners, reordered if the matrix knows a better ring).
  void start_proposal(Group& group, std::vector<PeerId> order = {});
  void renew_epoch(Group& group);
  void probe_or_commit(Group& group);
  void send_probe_round(Group& group);
  void end_probes(Group& group);
  void send_topology(Group& group, bool reorder);
  RingProblem ring_problem(Group& group, const std::vector<PeerId>& members);
  // `members` reordered when the matrix knows a ring better by the hysteresis rule; else nullopt.
  std::optional<std::vector<PeerId>> better_ring(Group& group, const std::vector<PeerId>& members,
                                                 std::chrono::milliseconds budget, double gain);
  void maybe_commit_proposal(Group& group);
  void settle_proposal(Group& group);
  // Marks the verdict's failed links unreachable.
  void reroute(Group& group, const Verdict& verdict);
  // Who the next proposal holds: the ring, then the joiners, less the fewest
  // members that leave a ring avoiding every unreachable pair (ring_choice.h).
  // Dropped joiners wait for a later vote (a newcomer may make a ring
  // possible); dropped accepted members are added to `evict`.
  std::vector<PeerId> placeable(Group& group, std::vector<PeerId>* evict);
  std::optional<std::string> refusal(const Connection& from, uint32_t group) const;
  void note_backoff(const std::string& source);
  void forget_idle_groups();
  void erase_collective(Group& group, std::map<uint32_t, Collective>::iterator it);
  void clear_collectives(Group& group);
  void abort_collective(Group& group, uint32_t seq, Errc code, const std::string& reason);
  void abort_all_collectives(Group& group, Errc code, const std::string& reason,
                             const std::set<uint32_t>& spared = {});
  // A member was lost: its collectives abort, except syncs every unfinished
  // member can still finish from the holders that are left (they go on without it).
  void collectives_lose(Group& group, PeerId lost, const std::string& reason);
  bool sync_outlives(const Group& group, const Collective& c) const;
  void commit_collective(Group& group, std::map<uint32_t, Collective>::iterator it);
  // "all_reduce(count 8, f32, sum, tag 0, quant none), 32 B": what the record's members began, for its outcome line.
  static std::string collective_text(const Collective& c);

  Group& group_of(const Peer& peer) { return groups_[peer.group]; }
  // "rank 1 (peer 17..., at HOST)": programs print ranks, the id and host tell
  // runs and machines apart; "peer N" once the master has forgotten it.
  std::string who(PeerId id) const;
  // Every peer must make the same calls in the same order: a vote or pending
  // query where another member began a collective would leave both waiting
  // until their deadlines. These fail both calls at once as a mismatch.
  bool vote_out_of_order(Group& group, Peer& peer, const char* call);
  bool begin_out_of_order(Group& group, PeerId from, uint32_t seq);
  // The members of `group` that `has` lacks, named by who(); "" when none.
  std::string members_without(const Group& group, const std::function<bool(PeerId)>& has) const;
  wire::TopologyDone done_message(const Group& group) const;
  // A verdict for the journal and the stats (and each member's counts).
  void record_verdict(const Group& group, const Collective& c, Errc result);
  // The smallest bandwidth along `order` as a ring; unset unless every hop is measured (master_view.cpp).
  std::optional<double> bottleneck_of(Group& group, const std::vector<PeerId>& order);

  MasterLimits limits_;
  std::optional<RunSecret> secret_;
  std::map<ConnId, Connection> connections_;
  std::map<PeerId, Peer> peers_;
  std::map<uint32_t, Group> groups_;
  std::map<std::string, uint32_t> pending_by_source_;  // joiners waiting, per address; no zero entries
  std::map<std::string, Backoff> backoff_;             // at most limits_.max_backoff_sources
  std::set<uint32_t> maybe_idle_;                      // groups that lost a peer during this event
  uint64_t now_ms_ = 0;
  LogThrottle stranger_kicks_log_;  // on the state's clock, like everything else here
  MasterStats stats_;
  RunJournal journal_;
  PeerId next_peer_id_ = 1;
  uint64_t next_epoch_ = 1;
  Effects effects_;
};

}  // namespace ferry::master
