// The master's brain: a single-threaded, deterministic state machine fed by
// connection events and wire messages, answering with effects (messages to
// send, connections to close). No sockets, no threads, and no clock of its
// own: the caller says what time it is (advance_clock), so the same inputs
// always give the same outputs and every rule is unit-testable.
//
// One class, a file per job: its bounds in master_limits.h, its records
// (Peer, Group, Proposal, Collective, ...) in master_records.h; the frame
// (events in, effects out, a peer leaving) in master_state.cpp; admission,
// votes, proposals, collectives, link reports, resume and the view each in
// master_<job>.cpp (the private members below are grouped by file).
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
#include "master/master_limits.h"
#include "master/master_records.h"
#include "master/master_stats.h"
#include "master/relay_choice.h"
#include "master/ring_choice.h"
#include "master/ring_verdict.h"
#include "master/run_journal.h"
#include "master/run_view.h"
#include "wire/messages.h"

namespace ferry::master {

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
  // Dial host:port once (no bytes sent) within timeout_ms and report with on_reachability.
  struct CheckReachability {
    PeerId peer;
    std::string host;
    uint16_t port;
    uint32_t timeout_ms;
  };
  std::vector<Send> sends;
  std::vector<Close> closes;
  std::vector<SetSilenceDeadline> deadlines;
  std::vector<CheckReachability> reachability_checks;
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
  // The answer to an Effects::CheckReachability: whether the dial connected. A
  // peer that did not is treated as dial-out-only; either way it is then offered
  // to its group. An answer for a peer gone or not being checked is ignored.
  void on_reachability(PeerId peer, bool reachable);
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
  // The private members come in the order of the files that hold them, one per job.

  // --- master_state.cpp: events in, effects out; leaving; names -------------------
  void dispatch(ConnId conn, const wire::Message& message);
  void drop_connection(ConnId conn, const std::string& reason);
  void handle(Peer& peer, const wire::Leave& m);
  // Closes the connection with a kick saying why; its peer goes (remove_peer).
  void kick(ConnId conn, Errc code, const std::string& reason);
  // The same for a member its group is evicting (a proposal's culprits, the
  // members no ring can hold), except that the group does not react
  // (after_loss): the caller proposes once, when all of them are gone.
  void evict(PeerId id, Errc code, const std::string& reason);
  void close_with_kick(ConnId conn, Errc code, const std::string& reason);
  // forget_peer, then after_loss.
  void remove_peer(PeerId id, const std::string& reason);
  // Forgets the peer everywhere (its connection closed, its group's ring,
  // waiting list, votes and collectives without it); returns its group
  // (nullptr when it was not a peer).
  Group* forget_peer(PeerId id, const std::string& reason);
  // The group's answer to losing `id`: a proposal without it (it was in the
  // one in flight, or the group has no ring but joiners), or a vote decided
  // without it.
  void after_loss(Group& group, PeerId id);
  void forget_revision_holder(Group& group, PeerId id);
  void forget_idle_groups();
  void send(PeerId id, wire::Message message);
  void send_all(const std::vector<PeerId>& ids, const wire::Message& message);
  Group& group_of(const Peer& peer) { return groups_[peer.group]; }
  // "rank 1 (peer 17..., at HOST)": programs print ranks, the id and host tell
  // runs and machines apart; "peer N" once the master has forgotten it.
  std::string who(PeerId id) const;
  // The members of `group` that `has` lacks, named by who(); "" when none.
  std::string members_without(const Group& group, const std::function<bool(PeerId)>& has) const;

  // --- master_admission.cpp: hellos, caps per source and group, back-off ----------
  void on_hello(ConnId conn, const wire::Hello& hello);
  void handle(Peer& peer, const wire::Hello& m);
  // Makes the connection's peer (welcomed, pending) with this id.
  Peer& add_peer(ConnId conn, const wire::Hello& hello, PeerId id, uint32_t heartbeat_timeout_ms);
  std::optional<std::string> refusal(const Connection& from, uint32_t group) const;
  void note_backoff(const std::string& source);

  // --- master_resume.cpp: groups rebuilt from resume hellos -----------------------
  void on_resume(ConnId conn, const wire::Hello& hello, uint32_t heartbeat_timeout_ms);
  void maybe_settle(Group& group);

  // --- master_votes.cpp: topology votes, pending queries, the calls' order --------
  void handle(Peer& peer, const wire::TopologyVote& m);
  void handle(Peer& peer, const wire::PendingQuery& m);
  void maybe_complete_votes(Group& group);
  void offer_to_group(Group& group);  // a newcomer now waits in it: start or complete what admits it
  // Every peer must make the same calls in the same order: a vote or pending
  // query where another member began a collective would leave both waiting
  // until their deadlines. These fail both calls at once as a mismatch.
  bool vote_out_of_order(Group& group, Peer& peer, const char* call);
  bool begin_out_of_order(Group& group, PeerId from, uint32_t seq);

  // --- master_proposals.cpp: ring choice, probe rounds, verdicts, reroutes, commit -
  // `order`: the members in the ring order to propose (empty: the ring, then
  // the joiners, reordered if the matrix knows a better ring).
  void start_proposal(Group& group, std::vector<PeerId> order = {});
  void send_topology(Group& group, bool reorder);
  void handle(Peer& peer, const wire::TopologyReady& m);
  void settle_proposal(Group& group);
  // Marks the verdict's failed links unreachable.
  void reroute(Group& group, const Verdict& verdict);
  // Who the next proposal holds: the ring, then the joiners, less the fewest
  // members that leave a ring avoiding every unreachable pair (ring_choice.h).
  // Dropped joiners wait for a later vote (a newcomer may make a ring
  // possible); dropped accepted members are added to `evict`.
  std::vector<PeerId> placeable(Group& group, std::vector<PeerId>* evict);
  RingProblem ring_problem(Group& group, const std::vector<PeerId>& members);
  // Whether `from` can open connections to `to` as far as the master knows (link_dialers.h).
  bool can_dial(const Group& group, PeerId from, PeerId to) const;
  // Whether the group may ask a and b to punch through to each other (Group::punching).
  bool can_punch(const Group& group, PeerId a, PeerId b) const;
  // Who may relay what for the group's rings (relay_choice.h).
  RelayReach relay_reach(const Group& group) const;
  // `members` reordered when the matrix knows a ring better by the hysteresis rule; else nullopt.
  std::optional<std::vector<PeerId>> better_ring(Group& group, const std::vector<PeerId>& members,
                                                 std::chrono::milliseconds budget, double gain);
  void probe_or_commit(Group& group);
  void send_probe_round(Group& group);
  void handle(Peer& peer, const wire::ProbeDone& m);
  // On the tick: members that never answered the round in flight are kicked.
  void kick_silent_probers(Group& group);
  void end_probes(Group& group);
  void maybe_commit_proposal(Group& group);
  void renew_epoch(Group& group);
  wire::TopologyDone done_message(const Group& group) const;

  // --- master_collectives.cpp: begin, go, end, verdicts ---------------------------
  void handle(Peer& peer, const wire::CollectiveBegin& m);
  void handle(Peer& peer, const wire::SyncBegin& m);
  void handle(Peer& peer, const wire::CollectiveEnd& m);
  void begin_collective(Peer& peer, const wire::CollectiveBegin& m, const wire::SyncBegin* sync);
  void start_collective(Group& group, uint32_t seq);
  void commit_collective(Group& group, std::map<uint32_t, Collective>::iterator it);
  void abort_collective(Group& group, uint32_t seq, Errc code, const std::string& reason);
  void abort_all_collectives(Group& group, Errc code, const std::string& reason,
                             const std::set<uint32_t>& spared = {});
  // A member was lost: its collectives abort, except syncs every unfinished
  // member can still finish from the holders that are left (they go on without it).
  void collectives_lose(Group& group, PeerId lost, const std::string& reason);
  bool sync_outlives(const Group& group, const Collective& c) const;
  void erase_collective(Group& group, std::map<uint32_t, Collective>::iterator it);
  void clear_collectives(Group& group);
  // A verdict for the journal and the stats (and each member's counts).
  void record_verdict(const Group& group, const Collective& c, Errc result);
  // "all_reduce(count 8, f32, sum, tag 0, quant none), 32 B": what the record's members began, for its outcome line.
  static std::string collective_text(const Collective& c);

  // --- master_links.cpp: link reports and matrix queries ---------------------------
  void handle(Peer& peer, const wire::LinkReport& m);
  void handle(Peer& peer, const wire::LinkMatrixQuery& m);

  // --- master_view.cpp ------------------------------------------------------------
  // A peer's status label (display only: kept for the view, nothing else reads it).
  void handle(Peer& peer, const wire::PeerLabel& m);
  // The smallest bandwidth along `order` as a ring; unset unless every hop is measured.
  std::optional<double> bottleneck_of(Group& group, const std::vector<PeerId>& order);

  MasterLimits limits_;
  std::optional<RunSecret> secret_;
  std::map<ConnId, Connection> connections_;
  std::map<PeerId, Peer> peers_;
  std::map<uint32_t, Group> groups_;
  std::map<std::string, uint32_t> pending_by_source_;  // joiners waiting, per address; no zero entries
  std::map<std::string, Backoff> backoff_;             // at most limits_.max_backoff_sources
  // Groups that lost a peer during this event. Erased (if left with no ring, no
  // joiner and no proposal) only when the event is over, by forget_idle_groups:
  // callers up the stack still hold their group (on_tick walks groups_ while
  // kicking; settle_proposal proposes again after its evictions). The one
  // re-entrancy guard left: erasing in place would need every caller to
  // re-find its group after each kick.
  std::set<uint32_t> maybe_idle_;
  uint64_t now_ms_ = 0;
  LogThrottle stranger_kicks_log_;  // on the state's clock, like everything else here
  MasterStats stats_;
  RunJournal journal_;
  PeerId next_peer_id_ = 1;
  uint64_t next_epoch_ = 1;
  Effects effects_;
};

}  // namespace ferry::master
