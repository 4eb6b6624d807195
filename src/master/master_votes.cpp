// Votes: topology votes (update_topology, optimize_topology, wait_for_world)
// and pending queries are decided once every member of the ring is in; the
// calls' order is compared with the collectives members began.
#include <algorithm>

#include "core/log.h"
#include "master/collective_names.h"
#include "master/master_state.h"
#include "master/peer_ids.h"

namespace ferry::master {

namespace {

// The longest a ferry_wait_for_world vote is held, whatever a peer asks: a day, as ferry.h's timeouts.
constexpr uint64_t kMaxVoteHoldMs = 86'400'000;

}  // namespace

void MasterState::handle(Peer& peer, const wire::TopologyVote& m) {
  Group& group = group_of(peer);
  if (peer.phase != Phase::accepted)
    return kick(peer.conn, Errc::protocol, "topology vote from a peer that is not accepted");
  // Named as the C API calls them (the Python binding spells them its way).
  const char* call = m.min_world > 0 ? "ferry_wait_for_world"
                     : m.optimize    ? "ferry_optimize_topology"
                                     : "ferry_update_topology";
  if (vote_out_of_order(group, peer, call)) return;
  peer.voted_in = call;
  group.topology_votes.insert(peer.id);
  group.links_broken_vote |= m.links_broken != 0;
  group.optimize_vote |= m.optimize != 0;
  // A plain vote (min_world 0) allows no wait: the vote is decided once all are in, as before.
  const uint64_t hold = m.min_world > 0 ? std::min<uint64_t>(m.hold_ms, kMaxVoteHoldMs) : 0;
  group.vote_min_world = std::max(group.vote_min_world, m.min_world);
  group.vote_hold_until_ms = std::min(group.vote_hold_until_ms, now_ms_ + hold);
  maybe_complete_votes(group);
}

void MasterState::handle(Peer& peer, const wire::PendingQuery&) {
  Group& group = group_of(peer);
  if (peer.phase != Phase::accepted)
    return kick(peer.conn, Errc::protocol, "pending query from a peer that is not accepted");
  if (vote_out_of_order(group, peer, "ferry_peers_pending")) return;
  peer.voted_in = "ferry_peers_pending";
  group.pending_queries.insert(peer.id);
  maybe_complete_votes(group);
}

namespace {
constexpr const char* kSameOrder = "; every peer must make the same calls in the same order";
}

bool MasterState::vote_out_of_order(Group& group, Peer& peer, const char* call) {
  if (group.failed_in_epoch || group.broken || group.proposal || (group.resume && !group.resume->settled) ||
      !contains(group.ring, peer.id))
    return false;  // no order to compare (see failed_in_epoch), or collectives are refused there anyway
  std::vector<uint32_t> skipped;
  for (const auto& [seq, c] : group.collectives)
    if (!c.verdict && !c.begins.empty() && !c.begins.count(peer.id)) skipped.push_back(seq);
  if (skipped.empty()) return false;
  const auto& [first, begin] = *group.collectives.at(skipped.front()).begins.begin();
  const std::string reason = "calls out of order: " + who(peer.id) + " called " + call + " where " + who(first) +
                             " called " + describe_collective(begin) + " (collective " +
                             std::to_string(skipped.front()) + ")" + kSameOrder;
  send(peer.id,
       wire::CallRefused{.code = static_cast<uint32_t>(Errc::mismatch), .reason = wire::bounded_reason(reason)});
  for (uint32_t seq : skipped) abort_collective(group, seq, Errc::mismatch, reason);
  return true;
}

bool MasterState::begin_out_of_order(Group& group, PeerId from, uint32_t seq) {
  if (group.failed_in_epoch) return false;
  const Collective& c = group.collectives.at(seq);
  std::vector<PeerId> voters;
  for (const std::set<PeerId>* votes : {&group.topology_votes, &group.pending_queries})
    for (PeerId id : *votes)
      if (id != from && !c.begins.count(id) && !contains(voters, id)) voters.push_back(id);
  if (voters.empty()) return false;
  std::string calls;
  for (PeerId id : voters)
    calls += (calls.empty() ? "" : " and ") + who(id) + " called " + peers_.at(id).voted_in;
  const std::string reason = "calls out of order: " + who(from) + " called " + describe_collective(c.begins.at(from)) +
                             " (collective " + std::to_string(seq) + ") where " + calls + kSameOrder;
  for (PeerId id : voters) {
    group.topology_votes.erase(id);
    group.pending_queries.erase(id);
    send(id, wire::CallRefused{.code = static_cast<uint32_t>(Errc::mismatch), .reason = wire::bounded_reason(reason)});
  }
  if (group.topology_votes.empty()) {
    group.vote_min_world = 0;
    group.vote_hold_until_ms = UINT64_MAX;
  }
  abort_collective(group, seq, Errc::mismatch, reason);
  return true;
}

void MasterState::maybe_complete_votes(Group& group) {
  if (group.resume && !group.resume->settled) return;  // maybe_settle calls again
  auto all_in = [&](const std::set<PeerId>& votes) {
    if (group.ring.empty() || group.proposal) return false;
    // Fewer votes than members: one is missing for sure. Checked first, so each
    // vote costs O(log N) and only the last one scans the ring (O(N) per vote
    // message made a 256-member vote O(N^2)).
    if (votes.size() < group.ring.size()) return false;
    return std::all_of(group.ring.begin(), group.ring.end(),
                       [&](PeerId id) { return votes.count(id) > 0; });
  };
  if (all_in(group.pending_queries)) {
    uint32_t pending = static_cast<uint32_t>(group.waiting.size());
    send_all(group.ring, wire::PendingCount{.pending = pending});
    group.pending_queries.clear();
  }
  // Held for ferry_wait_for_world: a newcomer's hello or the tick (at the deadline) calls again.
  const bool held = group.ring.size() + group.waiting.size() < group.vote_min_world &&
                    now_ms_ < group.vote_hold_until_ms;
  if (all_in(group.topology_votes) && !held) {
    group.topology_votes.clear();
    group.vote_min_world = 0;
    group.vote_hold_until_ms = UINT64_MAX;
    bool optimize = std::exchange(group.optimize_vote, false);
    group.links.expire(now_ms_, limits_.link_max_age_ms);
    // A pair whose back-off ended is probed again once the rebuilt ring's links are up.
    bool rebuild = placeable(group, nullptr) != group.ring || group.broken || group.links_broken_vote || optimize ||
                   group.links.retry_due(group.ring) ||
                   better_ring(group, group.ring, std::chrono::milliseconds(100), limits_.ring_reorder_gain);
    group.links_broken_vote = false;
    if (!rebuild) return renew_epoch(group);  // the ring stands, its links stay up
    if (optimize) {
      // Measured afresh: every pair is probed once the links are up, and the best order taken.
      log().info("phase: group {} re-measures its links and re-orders its ring", group.id);
      group.links.clear();
    }
    start_proposal(group);
    if (optimize && group.proposal) group.proposal->optimize = true;
  }
}

}  // namespace ferry::master
