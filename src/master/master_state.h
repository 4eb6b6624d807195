// The master's brain: a single-threaded, deterministic state machine fed by
// connection events and wire messages, answering with effects (messages to
// send, connections to close). No sockets, no clocks, no threads: the same
// inputs always give the same outputs, so every rule is unit-testable.
//
// Membership, per peer group:
//   pending  --(accepted members all vote topology, or the group is empty)-->
//   in a proposal (every member dials its ring neighbours, reports ready) -->
//   accepted (the proposal committed: topology_done).
// A proposal that loses a member, or whose member cannot be reached, is
// re-proposed without that peer under a new epoch; each retry drops at least
// one peer, so it terminates.
//
// Collectives (per committed epoch, numbered seq = 0, 1, ... in issue order):
//   every member sends collective_begin(seq); all agree -> collective_go to
//   all; each sends collective_end; all ok -> collective_result(ok) to all.
//   A disagreement, a failed end, or a lost member aborts the collective for
//   every member alike: success is all-or-nothing.
// Losing an accepted member marks its group's ring broken: collectives fail
// with peer_lost until the survivors vote a new topology.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/run_secret.h"
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
};

class MasterState {
 public:
  // With a secret, every peer must prove it holds it (and the master proves it back).
  explicit MasterState(MasterLimits limits = {}, std::optional<RunSecret> secret = std::nullopt);

  // `nonce`: fresh randomness from the caller (the state machine itself stays deterministic).
  void on_connected(ConnId conn, const std::string& remote_host, const std::string& nonce);
  void on_message(ConnId conn, const wire::Message& message);
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

 private:
  enum class Phase { pending, accepted };

  struct Peer {
    PeerId id = 0;
    ConnId conn = 0;
    uint32_t group = 0;
    wire::RingMember endpoint;
    uint32_t connections = 0;
    Phase phase = Phase::pending;
  };

  struct Proposal {
    uint64_t epoch = 0;
    std::vector<PeerId> members;
    std::set<PeerId> ready;
  };

  struct Collective {
    std::vector<PeerId> members;  // the ring when it began
    std::map<PeerId, wire::CollectiveBegin> begins;        // what every kind must agree on
    std::map<PeerId, wire::SyncBegin> sync_begins;         // shared-state syncs only
    std::optional<uint64_t> elected_revision;              // a sync's revision, set when planned
    std::set<PeerId> ended_ok;
    bool go_sent = false;
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
    std::set<PeerId> pending_queries;
    std::optional<Proposal> proposal;
    std::map<uint32_t, Collective> collectives;  // open ones, by seq
    std::optional<uint64_t> shared_revision;      // of the last committed shared-state sync
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
  void on_hello(ConnId conn, const wire::Hello& hello);

  void kick(ConnId conn, Errc code, const std::string& reason);
  void remove_peer(PeerId id, const std::string& reason);
  void send(PeerId id, wire::Message message);
  void send_all(const std::vector<PeerId>& ids, const wire::Message& message);

  void maybe_complete_votes(Group& group);
  void start_proposal(Group& group);
  void renew_epoch(Group& group);
  void maybe_commit_proposal(Group& group);
  void abort_collective(Group& group, uint32_t seq, Errc code, const std::string& reason);
  void abort_all_collectives(Group& group, Errc code, const std::string& reason);

  Group& group_of(const Peer& peer) { return groups_[peer.group]; }
  wire::TopologyDone done_message(const Group& group) const;

  MasterLimits limits_;
  std::optional<RunSecret> secret_;
  std::map<ConnId, Connection> connections_;
  std::map<PeerId, Peer> peers_;
  std::map<uint32_t, Group> groups_;
  PeerId next_peer_id_ = 1;
  uint64_t next_epoch_ = 1;
  Effects effects_;
};

}  // namespace ferry::master
