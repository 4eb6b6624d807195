// The calls this peer makes to the master, and their answers: topology
// votes (update_topology, wait_for_world), the query of pending newcomers
// and the link matrix query. One helper (ask) sends a call and waits for its
// answer: a vote or a pending query also ends when the master is lost (it is
// sent again to the master that comes back) or refuses it (it throws); a
// matrix query waits for its own answer only.
//
// Lock rule: the answers below are guarded by state.mu (peer_state.h); votes
// and pending queries are serialized by state.votes, taken before state.mu.
// state.mu is released around every send and every call into the ring or the
// collectives (membership.view, links_broken, report_links, ops.size).
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "peer/master_redial.h"
#include "peer/ring_membership.h"

namespace ferry::peer {

class MasterCalls {
 public:
  // `timeout`: how long a call waits for its answer unless it says otherwise (timeout_ms).
  MasterCalls(PeerState& state, MasterSession& session, RingMembership& membership, OpRegistry& ops,
              MasterRedial& redial, std::chrono::milliseconds timeout);

  // `optimize`: ask the master to re-measure every link and take the best ring order.
  void update_topology(bool optimize);
  // Votes until the group holds at least min_peers members (communicator.h).
  void wait_for_world(uint32_t min_peers, std::optional<std::chrono::milliseconds> limit);
  uint32_t peers_pending();
  // The group's link matrix, after this peer's own unreported measurements.
  std::vector<wire::LinkEntry> link_matrix();

  // The answers, from the master session's strand.
  void on_topology_done();  // a topology committed (or repeated): the answer to a vote
  void on_pending_count(uint32_t pending);
  void on_call_refused(const wire::CallRefused& refused);
  void on_link_matrix(wire::LinkMatrix& matrix);

 private:
  // Calls send() with no lock held, then waits up to `limit` for answered(), or, when
  // `resent_after_loss`, for a lost master (false) or a refusal (throws). state.mu held via lock.
  // A wait past 5 s logs `notice` (peer_state.h).
  template <class Send, class Answered>
  bool ask(std::unique_lock<std::mutex>& lock, Send send, Answered answered, const std::string& what,
           std::chrono::milliseconds limit, bool resent_after_loss, const PeerState::Notice& notice = nullptr);
  // Sends one topology vote and waits up to `limit` for the topology it decides. False when
  // the master was lost meanwhile: vote again with the one that comes back. votes and mu held.
  bool cast_vote(std::unique_lock<std::mutex>& lock, wire::TopologyVote ballot, std::chrono::milliseconds limit,
                 const char* call, const PeerState::Notice& notice);
  // Waits for a master being dialed again, then throws unless accepted. state.mu held via lock.
  void ready_for(std::unique_lock<std::mutex>& lock, const char* call);

  PeerState& state_;
  MasterSession& session_;
  RingMembership& membership_;
  OpRegistry& ops_;
  MasterRedial& redial_;
  const std::chrono::milliseconds timeout_;
  // All below guarded by state_.mu.
  uint64_t topology_done_count_ = 0;
  uint64_t pending_answers_ = 0;
  uint32_t last_pending_ = 0;
  uint64_t refusals_ = 0;  // votes and pending queries the master refused (calls out of order)
  Status last_refusal_;
  uint64_t link_queries_ = 0;                 // matrix queries sent (their request ids)
  uint64_t link_answered_ = 0;                // the request the last matrix answered
  std::vector<wire::LinkEntry> link_matrix_;  // that answer
};

}  // namespace ferry::peer
