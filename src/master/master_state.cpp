#include "master/master_state.h"

#include <numeric>

#include <algorithm>

#include "core/auth_labels.h"
#include "master/collective_names.h"
#include "master/ring_verdict.h"
#include "master/peer_ids.h"
#include "master/shared_state_election.h"

#include "core/log.h"
#include "net/host_addresses.h"

namespace ferry::master {

namespace {

// The longest a ferry_wait_for_world vote is held, whatever a peer asks: a day, as ferry.h's timeouts.
constexpr uint64_t kMaxVoteHoldMs = 86'400'000;

}  // namespace

MasterState::MasterState(MasterLimits limits, std::optional<RunSecret> secret, uint64_t first_peer_id)
    : limits_(limits), secret_(std::move(secret)), next_peer_id_(std::max<uint64_t>(first_peer_id, 1)) {}

Effects MasterState::take_effects() { return std::exchange(effects_, {}); }

void MasterState::on_connected(ConnId conn, const std::string& remote_host, const std::string& nonce) {
  connections_[conn] = Connection{remote_host, nonce, std::nullopt};
  effects_.sends.push_back({conn, wire::AuthChallenge{nonce, secret_.has_value()}});
}

void MasterState::on_disconnected(ConnId conn, const std::string& reason) {
  if (auto it = connections_.find(conn); it != connections_.end() && it->second.peer) {
    ++stats_.lost;
    const PeerId id = *it->second.peer;
    journal_.event(now_ms_, "lost", peers_.at(id).group, id, who(id) + " lost: " + reason);
  }
  drop_connection(conn, reason);
  forget_idle_groups();
}

void MasterState::drop_connection(ConnId conn, const std::string& reason) {
  auto it = connections_.find(conn);
  if (it == connections_.end()) return;
  auto peer = it->second.peer;
  connections_.erase(it);
  if (peer) remove_peer(*peer, reason);
}

void MasterState::advance_clock(uint64_t now_ms) { now_ms_ = std::max(now_ms_, now_ms); }

void MasterState::on_message(ConnId conn, const wire::Message& message) {
  dispatch(conn, message);
  forget_idle_groups();
}

void MasterState::dispatch(ConnId conn, const wire::Message& message) {
  auto cit = connections_.find(conn);
  if (cit == connections_.end()) return;  // already closed: late message
  if (!cit->second.peer) {
    if (const auto* hello = std::get_if<wire::Hello>(&message)) return on_hello(conn, *hello);
    return kick(conn, Errc::protocol,
                std::string("expected hello, got ") +
                    wire::message_type_name(static_cast<uint16_t>(wire::message_type(message))));
  }
  Peer& peer = peers_.at(*cit->second.peer);
  peer.heard_ms = now_ms_;
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, wire::Hello> || std::is_same_v<M, wire::TopologyVote> ||
                      std::is_same_v<M, wire::TopologyReady> || std::is_same_v<M, wire::PendingQuery> ||
                      std::is_same_v<M, wire::CollectiveBegin> || std::is_same_v<M, wire::CollectiveEnd> ||
                      std::is_same_v<M, wire::SyncBegin> || std::is_same_v<M, wire::Leave> ||
                      std::is_same_v<M, wire::LinkReport> || std::is_same_v<M, wire::LinkMatrixQuery> ||
                      std::is_same_v<M, wire::ProbeDone>) {
          handle(peer, m);
        } else {
          kick(conn, Errc::protocol,
               std::string("a peer may not send ") +
                   wire::message_type_name(static_cast<uint16_t>(M::kType)));
        }
      },
      message);
}

// --- joining -----------------------------------------------------------------

void MasterState::on_hello(ConnId conn, const wire::Hello& hello) {
  Connection& from = connections_.at(conn);
  if (secret_ && !secret_->verify(hello.proof, auth_label::kPeerToMaster, from.nonce, hello.nonce))
    return kick(conn, Errc::auth, "authentication failed: no valid proof of the run secret");
  if (hello.p2p_connections == 0 || hello.p2p_connections > wire::kMaxConnectionsPerLink)
    return kick(conn, Errc::invalid_argument,
                "p2p_connections must be 1.." + std::to_string(wire::kMaxConnectionsPerLink));
  if (hello.advertised_port == 0) return kick(conn, Errc::invalid_argument, "advertised p2p port is 0");
  uint32_t timeout = hello.heartbeat_timeout_ms ? hello.heartbeat_timeout_ms
                                                : limits_.default_heartbeat_timeout_ms;
  if (timeout < limits_.min_heartbeat_timeout_ms || timeout > limits_.max_heartbeat_timeout_ms)
    return kick(conn, Errc::invalid_argument,
                "heartbeat timeout " + std::to_string(timeout) + " ms is outside " +
                    std::to_string(limits_.min_heartbeat_timeout_ms) + ".." +
                    std::to_string(limits_.max_heartbeat_timeout_ms));

  if (hello.resume_peer_id) return on_resume(conn, hello, timeout);
  if (auto refused = refusal(from, hello.peer_group)) return kick(conn, Errc::kicked, *refused);

  Peer& peer = add_peer(conn, hello, next_peer_id_++, timeout);
  ++stats_.joins;
  Group& group = groups_[hello.peer_group];
  group.id = hello.peer_group;
  group.waiting.push_back(peer.id);
  ++pending_by_source_[peer.source];
  log().info("join: {} (group {}, p2p {}:{}, {} connections) is pending", peer_name(peer.id),
               group.id, peer.endpoint.host, peer.endpoint.port, peer.connections);
  journal_.event(now_ms_, "join", group.id, peer.id, who(peer.id) + " joined group " + std::to_string(group.id));
  // Nobody to ask: an empty group admits its first peers at once.
  if (group.ring.empty() && !group.proposal) return start_proposal(group);
  maybe_complete_votes(group);  // a vote held until enough newcomers wait may be decided now
}

MasterState::Peer& MasterState::add_peer(ConnId conn, const wire::Hello& hello, PeerId id, uint32_t timeout) {
  Connection& c = connections_.at(conn);
  Peer peer;
  peer.id = id;
  peer.conn = conn;
  peer.group = hello.peer_group;
  peer.connections = hello.p2p_connections;
  peer.source = c.remote_host;
  peer.silent_link_ms = hello.silent_link_ms;
  peer.joined_ms = peer.heard_ms = now_ms_;
  peer.endpoint.peer_id = peer.id;
  peer.endpoint.host = hello.advertised_host.empty() ? c.remote_host : hello.advertised_host;
  peer.endpoint.port = hello.advertised_port;
  peer.endpoint.other_hosts = net::other_family_addresses(peer.endpoint.host, hello.other_hosts, wire::kMaxOtherHosts);
  c.peer = peer.id;
  effects_.deadlines.push_back({conn, timeout});
  std::string proof = secret_ ? secret_->proof(auth_label::kMasterToPeer, hello.nonce, c.nonce) : std::string();
  Peer& added = peers_[peer.id] = peer;
  send(peer.id, wire::Welcome{peer.id, c.remote_host, proof});
  return added;
}

// Why a hello from `from` for `group` is refused, if it is.
std::optional<std::string> MasterState::refusal(const Connection& from, uint32_t group) const {
  if (uint64_t until = backoff_until(from.remote_host))
    return "joiners from " + from.remote_host + " did not form their ring links; this address may join again in " +
           std::to_string((until - now_ms_ + 999) / 1000) + " s";
  if (auto it = pending_by_source_.find(from.remote_host);
      it != pending_by_source_.end() && it->second >= limits_.max_pending_per_source)
    return std::to_string(it->second) + " joiners from " + from.remote_host +
           " already wait for admission (the most one address may have); retry once they are admitted";
  if (auto it = groups_.find(group); it != groups_.end() && it->second.waiting.size() >= limits_.max_pending_per_group)
    return "peer group " + std::to_string(group) + " already has " + std::to_string(it->second.waiting.size()) +
           " joiners waiting (the most a group may have); retry once they are admitted";
  return std::nullopt;
}

uint64_t MasterState::backoff_until(const std::string& host) const {
  auto it = backoff_.find(host);
  return it != backoff_.end() && it->second.until_ms > now_ms_ ? it->second.until_ms : 0;
}

void MasterState::note_backoff(const std::string& source) {
  auto it = backoff_.find(source);
  if (it != backoff_.end() && now_ms_ - it->second.last_eviction_ms >= limits_.backoff_forget_ms) {
    backoff_.erase(it);
    it = backoff_.end();
  }
  if (it == backoff_.end()) {
    if (backoff_.size() >= limits_.max_backoff_sources) {
      auto oldest = std::min_element(backoff_.begin(), backoff_.end(), [](const auto& a, const auto& b) {
        return a.second.last_eviction_ms < b.second.last_eviction_ms;
      });
      backoff_.erase(oldest);
    }
    it = backoff_.emplace(source, Backoff{}).first;
  }
  Backoff& b = it->second;
  uint64_t wait = limits_.backoff_initial_ms;
  for (uint32_t i = 0; i < b.evictions && wait < limits_.backoff_max_ms; ++i) wait *= 2;
  wait = std::min(wait, limits_.backoff_max_ms);
  ++b.evictions;
  b.last_eviction_ms = now_ms_;
  b.until_ms = now_ms_ + wait;
  log().warn("join: joiners from {} are refused for {} s (eviction {} of this address)", source, wait / 1000,
             b.evictions);
}

void MasterState::handle(Peer& peer, const wire::Hello&) {
  kick(peer.conn, Errc::protocol, "second hello on one connection");
}

void MasterState::handle(Peer& peer, const wire::Leave&) {
  ++stats_.left;
  journal_.event(now_ms_, "leave", peer.group, peer.id, who(peer.id) + " left");
  remove_peer(peer.id, "left");
}

// --- votes -------------------------------------------------------------------

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
  send(peer.id, wire::CallRefused{static_cast<uint32_t>(Errc::mismatch), wire::bounded_reason(reason)});
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
    send(id, wire::CallRefused{static_cast<uint32_t>(Errc::mismatch), wire::bounded_reason(reason)});
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
    send_all(group.ring, wire::PendingCount{pending});
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

// --- topology proposals --------------------------------------------------------

void MasterState::start_proposal(Group& group, std::vector<PeerId> order) {
  Proposal proposal;
  proposal.epoch = next_epoch_++;
  bool ordered = !order.empty();
  if (ordered) {
    proposal.members = std::move(order);
  } else {
    std::vector<PeerId> evict;
    proposal.members = placeable(group, &evict);
    for (PeerId id : group.waiting)
      if (!contains(proposal.members, id))
        log().info("join: {} waits: no ring with it avoids every pair that cannot connect", peer_name(id));
    std::string names;
    for (PeerId id : evict) names += (names.empty() ? "" : ", ") + peer_name(id);
    group.settling = true;
    for (PeerId id : evict)
      kick(peers_.at(id).conn, Errc::connect,
           "no ring of the group avoids every pair that cannot connect, and leaving out " + names +
               " is the fewest peers that makes one possible");
    group.settling = false;
  }
  if (proposal.members.empty()) {
    group.proposal.reset();
    return;
  }
  abort_all_collectives(group, Errc::peer_lost, "the ring is being rebuilt");
  proposal.started_ms = now_ms_;
  group.proposal = std::move(proposal);
  send_topology(group, !ordered);
}

RingProblem MasterState::ring_problem(Group& group, const std::vector<PeerId>& members) {
  group.links.expire(now_ms_, limits_.link_max_age_ms);
  RingProblem problem = RingProblem::sized(members.size());
  double longest = 0;
  for (size_t a = 0; a < members.size(); ++a)
    for (size_t b = 0; b < members.size(); ++b)
      if (a != b) {
        problem.bw(a, b) = group.links.capacity(members[a], members[b]);
        problem.rtt_ms[a * members.size() + b] = group.links.rtt_ms(members[a], members[b]);
        if (problem.bw(a, b) > 0) longest = std::max(longest, problem.rtt_ms[a * members.size() + b]);
      }
  // An unknown pair's RTT as the longest known one, as its rate is the slowest (ring_choice.h):
  // unmeasured must not look close.
  for (size_t a = 0; a < members.size(); ++a)
    for (size_t b = 0; b < members.size(); ++b)
      if (a != b && problem.bw(a, b) <= 0) problem.rtt_ms[a * members.size() + b] = longest;
  return problem;
}

std::optional<std::vector<PeerId>> MasterState::better_ring(Group& group, const std::vector<PeerId>& members,
                                                            std::chrono::milliseconds budget, double gain) {
  if (members.size() < 3) return std::nullopt;
  RingProblem problem = ring_problem(group, members);
  std::vector<size_t> start(members.size());
  std::iota(start.begin(), start.end(), 0);
  RingChoice given = evaluate_ring(problem, start);
  RingChoice best = choose_ring(problem, start, limits_.ring_rtt_tolerance, budget);
  // Hysteresis: measurement noise must not rebuild rings; a ring that needs an unreachable pair always goes.
  bool unusable = given.bottleneck < 0 && best.bottleneck >= 0;
  // As fast within tolerance, a ring whose hops wait `gain` times less RTT wins too (a long ring's
  // slow start and loss recovery cost throughput, and every step of a small all-reduce waits a hop).
  bool as_fast = best.bottleneck >= given.bottleneck * (1 - limits_.ring_rtt_tolerance);
  bool gains = gain > 1 ? best.bottleneck >= given.bottleneck * gain ||
                              (as_fast && best.total_rtt_ms * gain < given.total_rtt_ms)
                        : best.order != given.order && (best.bottleneck > given.bottleneck ||
                                                        best.total_rtt_ms < given.total_rtt_ms);
  if (!unusable && (!gains || !limits_.order_rings_by_links)) return std::nullopt;
  std::vector<PeerId> order;
  for (size_t i : best.order) order.push_back(members[i]);
  log().info("ring: group {}: order by bottleneck {:.1f} MB/s (total RTT {:.0f} ms) instead of {:.1f} MB/s ({:.0f} ms)",
             group.id, best.bottleneck / 1e6, best.total_rtt_ms, given.bottleneck / 1e6, given.total_rtt_ms);
  return order;
}

void MasterState::send_topology(Group& group, bool reorder) {
  Proposal& proposal = *group.proposal;
  if (reorder)
    if (auto order = better_ring(group, proposal.members, std::chrono::milliseconds(1000), limits_.ring_reorder_gain))
      proposal.members = std::move(*order);
  wire::Topology topology;
  topology.epoch = proposal.epoch;
  topology.peer_group = group.id;
  topology.p2p_connections = wire::kMaxConnectionsPerLink;
  for (PeerId id : proposal.members) {
    const Peer& p = peers_.at(id);
    topology.ring.push_back(p.endpoint);
    // A ring moves at its slowest link; one lane count for all keeps both ends of every link agreed.
    topology.p2p_connections = std::min(topology.p2p_connections, p.connections);
  }
  log().info("phase: group {} proposes epoch {} with {} peers", group.id, proposal.epoch,
               proposal.members.size());
  send_all(proposal.members, topology);
}

void MasterState::handle(Peer& peer, const wire::TopologyReady& m) {
  Group& group = group_of(peer);
  if (!group.proposal || group.proposal->epoch != m.epoch || !contains(group.proposal->members, peer.id))
    return;  // from a proposal already superseded
  if (group.proposal->answers.count(peer.id)) return;  // its first answer stands
  if (m.code != 0) {
    log().warn("phase: group {} epoch {} failed at {}: {}", group.id, m.epoch, who(peer.id), m.reason);
    ++group.proposal->failed_answers;
  }
  group.proposal->answers[peer.id] = m;
  settle_proposal(group);
}

void MasterState::settle_proposal(Group& group) {
  Proposal& p = *group.proposal;
  // While every answer in says ready, nobody is blamed, so a missing answer
  // always matters (ring_verdict.h: an accepted member's is waited for, and
  // every pending member is vouched for by a neighbour): nothing to decide
  // before the last one. Skipping the O(N) verdict here keeps a proposal's
  // answers O(N log N) in all, not O(N^2).
  if (p.failed_answers == 0 && p.answers.size() < p.members.size()) return;
  std::vector<VerdictMember> members;
  for (PeerId id : p.members) {
    VerdictMember m{id, peers_.at(id).phase == Phase::accepted, std::nullopt};
    if (auto it = p.answers.find(id); it != p.answers.end()) m.answer = it->second;
    members.push_back(std::move(m));
  }
  const bool may_reroute = group.reroutes < limits_.max_reroutes;
  for (VerdictMember& m : members) {
    uint64_t heard_until = p.started_ms + 1000 + std::min<uint64_t>(peers_.at(m.id).silent_link_ms, limits_.max_silent_link_ms);
    m.hear_if_blamed = may_reroute && peers_.at(m.id).silent_link_ms > 0 && now_ms_ < heard_until;
  }
  auto verdict = ring_verdict(members, may_reroute);
  if (!verdict) return;  // answers that could still matter are missing
  if (verdict->all_ready()) return probe_or_commit(group);
  uint64_t epoch = p.epoch;
  if (!verdict->failed_links.empty()) reroute(group, *verdict);  // start_proposal places the members around them
  if (!verdict->culprits.empty())
    log().warn("phase: group {} epoch {} failed; evicting {} peers", group.id, epoch, verdict->culprits.size());
  group.proposal.reset();
  group.settling = true;
  for (const Culprit& culprit : verdict->culprits) {
    const Peer& peer = peers_.at(culprit.id);
    std::string why = "evicted from the ring of epoch " + std::to_string(epoch) + ": " + culprit.why;
    if (peer.phase == Phase::pending) note_backoff(peer.source);
    kick(peer.conn, Errc::connect, why);
  }
  group.settling = false;
  start_proposal(group);  // ordered around every unreachable pair (better_ring)
}

void MasterState::reroute(Group& group, const Verdict& verdict) {
  ++group.reroutes;
  for (const FailedLink& link : verdict.failed_links) {
    uint64_t wait = group.links.mark_unreachable(link.from, link.to, now_ms_,
                                                 {limits_.unreachable_retry_ms, limits_.unreachable_retry_max_ms});
    log().warn("ring: group {}: {} cannot reach {} ({}); rings avoid that pair for {} s", group.id,
               peer_name(link.from), peer_name(link.to), link.why, wait / 1000);
  }
}

std::vector<PeerId> MasterState::placeable(Group& group, std::vector<PeerId>* evict) {
  std::vector<PeerId> members = group.ring;
  for (PeerId id : group.waiting)
    if (!contains(members, id)) members.push_back(id);
  if (!group.links.any_unreachable(members)) return members;
  // Keeping an accepted member is worth more than keeping a joiner; among equals, the older stays.
  std::vector<double> keep_weight;
  for (PeerId id : members)
    keep_weight.push_back((peers_.at(id).phase == Phase::accepted ? 1e6 : 0) + 1.0 / static_cast<double>(id));
  std::vector<size_t> drop = fewest_to_drop(ring_problem(group, members), keep_weight, std::chrono::milliseconds(500));
  if (drop.empty()) return members;
  std::vector<PeerId> kept;
  for (size_t i = 0; i < members.size(); ++i) {
    bool dropped = std::find(drop.begin(), drop.end(), i) != drop.end();
    if (!dropped)
      kept.push_back(members[i]);
    else if (evict && peers_.at(members[i]).phase == Phase::accepted)
      evict->push_back(members[i]);
  }
  return kept;
}

void MasterState::probe_or_commit(Group& group) {
  Proposal& p = *group.proposal;
  if (p.probing) return;
  p.probing = true;
  group.links.expire(now_ms_, limits_.link_max_age_ms);
  p.probe_rounds = plan_probes(
      p.members, [&](PeerId from, PeerId to) { return group.links.has(from, to); }, limits_.max_probe_rounds);
  if (p.probe_rounds.empty()) return maybe_commit_proposal(group);
  p.probe_started_ms = now_ms_;
  log().debug("phase: group {} epoch {} probes {} rounds", group.id, p.epoch, p.probe_rounds.size());
  send_probe_round(group);
}

void MasterState::end_probes(Group& group) {
  Proposal& p = *group.proposal;
  size_t pairs = 0;
  for (const auto& planned : p.probe_rounds) pairs += planned.size();
  log().info("phase: group {} epoch {} probed {} links in {} rounds, {} ms", group.id, p.epoch, pairs,
             p.probe_rounds.size(), now_ms_ - p.probe_started_ms);
  // What the probes found may call for another order: proposed now, before
  // anyone runs a collective on this one (its links are then known: no probes).
  if (auto order = better_ring(group, p.members, std::chrono::milliseconds(1000),
                               p.optimize ? 1.0 : limits_.ring_reorder_gain)) {
    group.proposal.reset();
    return start_proposal(group, std::move(*order));
  }
  maybe_commit_proposal(group);
}

void MasterState::on_tick(uint64_t now_ms) {
  advance_clock(now_ms);
  for (auto& [id, group] : groups_) {
    maybe_settle(group);
    if (!group.topology_votes.empty()) maybe_complete_votes(group);  // a held vote's deadline may have passed
    // A blamed joiner's deadline may have passed: the answers in hand decide.
    if (group.proposal && !group.proposal->probing) settle_proposal(group);
    if (!group.proposal || !group.proposal->probing || group.proposal->probe_waiting.empty()) continue;
    if (now_ms_ - group.proposal->probe_round_started_ms < limits_.probe_round_timeout_ms) continue;
    // An honest peer answers within its own bounds (link_probe.h); one that does not stalls the vote.
    std::vector<PeerId> silent(group.proposal->probe_waiting.begin(), group.proposal->probe_waiting.end());
    for (PeerId peer : silent)
      if (auto it = peers_.find(peer); it != peers_.end())
        kick(it->second.conn, Errc::protocol,
             "did not answer probe round " + std::to_string(group.proposal->probe_round) + " within " +
                 std::to_string(limits_.probe_round_timeout_ms) + " ms");
  }
  forget_idle_groups();
}

void MasterState::send_probe_round(Group& group) {
  Proposal& p = *group.proposal;
  std::map<PeerId, wire::ProbeRound> rounds;
  auto round_of = [&](PeerId id) -> wire::ProbeRound& {
    auto [it, fresh] = rounds.try_emplace(id);
    if (fresh) {
      it->second.epoch = p.epoch;
      it->second.round = static_cast<uint32_t>(p.probe_round);
    }
    return it->second;
  };
  for (const ProbePair& pair : p.probe_rounds[p.probe_round]) {
    round_of(pair.from).targets.push_back(peers_.at(pair.to).endpoint);
    round_of(pair.to).sources.push_back(pair.from);
  }
  p.probe_waiting.clear();
  p.probe_round_started_ms = now_ms_;
  for (auto& [id, round] : rounds) {
    p.probe_waiting.insert(id);
    send(id, std::move(round));
  }
}

void MasterState::handle(Peer& peer, const wire::ProbeDone& m) {
  Group& group = group_of(peer);
  if (!group.proposal || !group.proposal->probing || group.proposal->epoch != m.epoch ||
      group.proposal->probe_round != m.round || !group.proposal->probe_waiting.count(peer.id))
    return;  // from a proposal or round already over
  Proposal& p = *group.proposal;
  const ProbeRoundPlan& round = p.probe_rounds[p.probe_round];
  auto asked = [&](PeerId to) {
    return std::any_of(round.begin(), round.end(), [&](const ProbePair& q) { return q.from == peer.id && q.to == to; });
  };
  for (const wire::LinkEntry& e : m.links)
    if (e.from_peer != peer.id || !asked(e.to_peer))
      return kick(peer.conn, Errc::protocol, "probe_done may only hold the links its round asked for");
  for (PeerId to : m.unreachable) {
    if (!asked(to)) return kick(peer.conn, Errc::protocol, "probe_done names an unreachable peer it was not asked to probe");
    log().info("probe: group {}: {} cannot reach {}", group.id, peer_name(peer.id), peer_name(to));
    group.links.mark_unreachable(peer.id, to, now_ms_, {limits_.unreachable_retry_ms, limits_.unreachable_retry_max_ms});
  }
  group.links.record(peer.id, m.links, p.members, now_ms_, /*probed=*/true);
  p.probe_waiting.erase(peer.id);
  if (!p.probe_waiting.empty()) return;
  if (++p.probe_round < p.probe_rounds.size()) {
    if (now_ms_ - p.probe_started_ms < limits_.probe_budget_ms) return send_probe_round(group);
    p.probe_rounds.resize(p.probe_round);  // the pairs left wait for a later vote
  }
  end_probes(group);
}

void MasterState::maybe_commit_proposal(Group& group) {
  if (!group.proposal) return;
  Proposal& p = *group.proposal;
  group.epoch = p.epoch;
  group.ring = p.members;
  group.broken = false;
  clear_collectives(group);
  group.topology_votes.clear();
  group.vote_min_world = 0;
  group.vote_hold_until_ms = UINT64_MAX;
  group.links_broken_vote = false;
  group.pending_queries.clear();
  for (PeerId id : group.ring) {
    Peer& peer = peers_.at(id);
    if (peer.phase == Phase::pending) {
      auto it = pending_by_source_.find(peer.source);
      if (--it->second == 0) pending_by_source_.erase(it);
    }
    peer.phase = Phase::accepted;
    erase_value(group.waiting, id);
  }
  group.proposal.reset();
  group.reroutes = 0;
  group.resume.reset();
  log().info("phase: group {} committed epoch {}: ring of {}", group.id, group.epoch, group.ring.size());
  journal_.event(now_ms_, "epoch", group.id, std::nullopt,
                 "group " + std::to_string(group.id) + " committed epoch " + std::to_string(group.epoch) + ": ring of " +
                     std::to_string(group.ring.size()));
  send_all(group.ring, done_message(group));
}

void MasterState::renew_epoch(Group& group) {
  group.epoch = next_epoch_++;
  clear_collectives(group);
  group.pending_queries.clear();
  log().debug("phase: group {} renews its ring as epoch {}", group.id, group.epoch);
  send_all(group.ring, done_message(group));
}

wire::TopologyDone MasterState::done_message(const Group& group) const {
  wire::TopologyDone done;
  done.epoch = group.epoch;
  for (const auto& [id, g] : groups_) {
    if (g.ring.empty()) continue;
    done.global_world += static_cast<uint32_t>(g.ring.size());
    done.num_groups += 1;
    done.largest_group = std::max(done.largest_group, static_cast<uint32_t>(g.ring.size()));
  }
  return done;
}

// --- collectives ---------------------------------------------------------------

void MasterState::handle(Peer& peer, const wire::CollectiveBegin& m) {
  using Kind = wire::CollectiveKind;
  if (m.kind != static_cast<uint8_t>(Kind::allreduce) && m.kind != static_cast<uint8_t>(Kind::barrier) &&
      m.kind != static_cast<uint8_t>(Kind::broadcast))
    return kick(peer.conn, Errc::protocol, "collective_begin of unknown kind " + std::to_string(m.kind));
  begin_collective(peer, m, nullptr);
}

void MasterState::handle(Peer& peer, const wire::SyncBegin& m) {
  if (m.strategy > static_cast<uint8_t>(wire::SyncStrategy::send_only))
    return kick(peer.conn, Errc::protocol, "unknown shared-state strategy " + std::to_string(m.strategy));
  // Syncs agree on their kind here; their layouts are compared by the election, which can say how they differ.
  wire::CollectiveBegin summary;
  summary.epoch = m.epoch;
  summary.seq = m.seq;
  summary.kind = static_cast<uint8_t>(wire::CollectiveKind::shared_state);
  begin_collective(peer, summary, &m);
}

void MasterState::begin_collective(Peer& peer, const wire::CollectiveBegin& m, const wire::SyncBegin* sync) {
  Group& group = group_of(peer);
  if (peer.phase != Phase::accepted)
    return kick(peer.conn, Errc::protocol, "collective from a peer that is not accepted");
  auto refuse = [&](Errc code, const std::string& why) {
    send(peer.id, wire::CollectiveResult{m.epoch, m.seq, static_cast<uint32_t>(code), wire::bounded_reason(why)});
  };
  if (m.epoch != group.epoch || group.broken || group.proposal) {
    ++stats_.begins_refused;
    return refuse(Errc::peer_lost, "the ring changed (a peer was lost or is joining); call update_topology");
  }

  if (auto it = group.collectives.find(m.seq); it != group.collectives.end() && it->second.begins.count(peer.id))
    return kick(peer.conn, Errc::protocol, "collective " + std::to_string(m.seq) + " begun twice");
  if (peer.open_collectives >= limits_.max_open_collectives_per_peer)
    return kick(peer.conn, Errc::protocol,
                "more than " + std::to_string(limits_.max_open_collectives_per_peer) +
                    " collectives open at once (begun here, not yet begun or ended by the other members)");
  if (sync && peer.open_syncs >= limits_.max_open_syncs_per_peer)
    return kick(peer.conn, Errc::protocol,
                "more than " + std::to_string(limits_.max_open_syncs_per_peer) + " shared-state syncs open at once");
  auto [it, fresh] = group.collectives.try_emplace(m.seq);
  Collective& c = it->second;
  if (fresh) c.first_begin_ms = now_ms_;
  const std::vector<PeerId>& members = group.ring;
  // Compare with an earlier begin (before this one joins them, or it would compare with itself).
  std::optional<std::pair<PeerId, wire::CollectiveBegin>> earlier;
  if (!c.begins.empty()) earlier = *c.begins.begin();
  c.begins[peer.id] = m;
  ++peer.open_collectives;
  if (sync) {
    c.sync_begins[peer.id] = *sync;
    ++peer.open_syncs;
  }
  if (c.verdict) {
    send(peer.id, *c.verdict);
    if (c.begins.size() == members.size()) erase_collective(group, it);
    return;
  }
  if (begin_out_of_order(group, peer.id, m.seq)) return;
  if (earlier && !earlier->second.same_collective(m)) {
    return abort_collective(group, m.seq, Errc::mismatch,
                            "collective " + std::to_string(m.seq) + " differs between peers (" +
                                collective_differences(earlier->second, m) + "): " + who(earlier->first) + " called " +
                                describe_collective(earlier->second) + ", " + who(peer.id) + " called " +
                                describe_collective(m));
  }
  if (c.begins.size() == members.size()) start_collective(group, m.seq);
}

void MasterState::start_collective(Group& group, uint32_t seq) {
  Collective& c = group.collectives.at(seq);
  c.go_sent = true;
  c.go_ms = now_ms_;
  if (c.sync_begins.empty()) return send_all(group.ring, wire::CollectiveGo{group.epoch, seq});
  std::vector<SyncCandidate> candidates;
  for (auto& [id, begin] : c.sync_begins) {
    const Peer& p = peers_.at(id);
    candidates.push_back({id, p.endpoint, begin});
  }
  ElectionOutcome outcome = elect_shared_state(candidates, group.shared_revision.has_value(),
                                               group.shared_revision.value_or(0));
  if (!outcome.status.ok()) {
    // Kick first, so a kicked peer hears why before its sync fails; losing it aborts the sync for the rest.
    for (uint64_t id : outcome.kick)
      if (auto it = peers_.find(id); it != peers_.end()) kick(it->second.conn, Errc::kicked, outcome.kick_reason);
    abort_collective(group, seq, outcome.status.code, outcome.status.message);
    return;
  }
  c.elected_revision = outcome.revision;
  log().info("phase: group {} epoch {} shared-state sync {} elects revision {}", group.id, group.epoch, seq,
             outcome.revision);
  for (auto& [id, plan] : outcome.plans) send(id, plan);
  c.plans = std::move(outcome.plans);
}

void MasterState::handle(Peer& peer, const wire::CollectiveEnd& m) {
  Group& group = group_of(peer);
  if (m.epoch != group.epoch) return;  // a verdict for that epoch was already given
  auto it = group.collectives.find(m.seq);
  if (it == group.collectives.end() || it->second.verdict) return;
  Collective& c = it->second;
  if (!c.begins.count(peer.id))
    return kick(peer.conn, Errc::protocol, "collective " + std::to_string(m.seq) + " ended before it began");
  if (m.code != 0) {
    Errc code = m.code <= static_cast<uint32_t>(kErrcMax) ? static_cast<Errc>(m.code) : Errc::internal;
    // A member that ended and has waited long for the verdict asks for an abort. The
    // others are still members (a lost one would have aborted this already) and each
    // fails its own op when its transfer stalls, so they are only slower: behind a
    // slow link, the member before it receives everything long before the one after
    // it (a 256 MiB all-reduce on three-regions: more than 60 s apart). It waits on.
    if (code == Errc::timeout && c.ended_ok.count(peer.id)) {
      wire::CollectivePending pending{group.epoch, m.seq, {}};
      for (PeerId id : group.ring)
        if (!c.ended_ok.count(id)) pending.waiting_for.push_back(id);
      log().info("phase: group {} epoch {} collective {}: {} has waited long for the verdict; {} of {} members "
                 "still running",
                 group.id, group.epoch, m.seq, peer_name(peer.id), pending.waiting_for.size(), group.ring.size());
      return send(peer.id, std::move(pending));
    }
    std::string reason = who(peer.id) + ": " + m.reason;
    if (!c.go_sent) {  // the usual cause: members late to begin it (a slow step, a different call)
      const std::string late = members_without(group, [&](PeerId id) { return c.begins.count(id) > 0; });
      if (!late.empty()) reason += "; not begun by " + late;
    }
    return abort_collective(group, m.seq, code, reason);
  }
  if (!c.go_sent)
    return kick(peer.conn, Errc::protocol, "collective " + std::to_string(m.seq) + " ended before go");
  c.ended_ok.insert(peer.id);
  c.last_end_ms = now_ms_;
  log().debug("phase: group {} epoch {} collective {}: {} ended, {} of {} members", group.id, group.epoch, m.seq,
              peer_name(peer.id), c.ended_ok.size(), group.ring.size());
  if (c.ended_ok.size() == group.ring.size()) commit_collective(group, it);
}

void MasterState::commit_collective(Group& group, std::map<uint32_t, Collective>::iterator it) {
  const Collective& c = it->second;
  if (c.elected_revision && c.elected_revision != group.shared_revision)
    journal_.event(now_ms_, "revision", group.id, std::nullopt,
                   "group " + std::to_string(group.id) + " shared state at revision " +
                       std::to_string(*c.elected_revision));
  if (c.elected_revision) {
    group.shared_revision = c.elected_revision;
    group.revision_holders.clear();
    for (const auto& [id, begin] : c.sync_begins) group.revision_holders.insert(id);
  }
  record_verdict(group, c, Errc::ok);
  ++stats_.committed;
  if (!c.sync_begins.empty()) {
    ++stats_.syncs_committed;
    stats_.sync_bytes_fetched += sync_fetch_bytes(c.sync_begins.begin()->second.tensors, c.plans);
  } else if (!c.begins.empty()) {
    stats_.bytes_reduced += collective_bytes(c.begins.begin()->second);
  }
  // Checked first: the text is built only when it is logged.
  if (log().should_log(spdlog::level::debug))
    log().debug("collective: group {} epoch {} collective {} ({}) committed; begin to go {} ms, go to last end {} ms, "
                "last end to commit {} ms",
                group.id, group.epoch, it->first, collective_text(c), c.go_ms - c.first_begin_ms,
                c.last_end_ms - c.go_ms, now_ms_ - c.last_end_ms);
  send_all(group.ring, wire::CollectiveResult{group.epoch, it->first, 0, ""});
  erase_collective(group, it);
}

void MasterState::record_verdict(const Group& group, const Collective& c, Errc result) {
  CollectiveRecord r;
  r.at_ms = now_ms_;
  r.group = group.id;
  r.result = result;
  if (!c.begins.empty()) {
    r.kind = c.begins.begin()->second.kind;
    r.bytes = c.sync_begins.empty() ? collective_bytes(c.begins.begin()->second)
                                    : sync_fetch_bytes(c.sync_begins.begin()->second.tensors, c.plans);
  }
  // An abort has the phases it reached; the one it was in runs until now.
  const uint64_t go = c.go_sent ? c.go_ms : now_ms_;
  r.start_ms = go - std::min(go, c.first_begin_ms);
  if (c.go_sent) {
    const uint64_t last_end = c.ended_ok.size() == group.ring.size() ? c.last_end_ms : now_ms_;
    r.transfer_ms = last_end - std::min(last_end, c.go_ms);
    r.commit_ms = now_ms_ - std::min(now_ms_, last_end);
  }
  stats_.record(r);
  journal_.collective(r);
  for (const auto& [id, begin] : c.begins)
    if (auto it = peers_.find(id); it != peers_.end())
      ++(result == Errc::ok ? it->second.collectives_ok : it->second.collectives_failed);
}

std::string MasterState::collective_text(const Collective& c) {
  if (c.begins.empty()) return "not begun";
  if (!c.sync_begins.empty()) {
    const auto& tensors = c.sync_begins.begin()->second.tensors;
    uint64_t bytes = 0;
    for (const wire::TensorDigest& t : tensors) bytes += tensor_bytes(t);
    return "sync_shared_state, " + std::to_string(tensors.size()) + " tensors, " + bytes_text(bytes);
  }
  const wire::CollectiveBegin& begin = c.begins.begin()->second;
  const uint64_t bytes = collective_bytes(begin);
  return describe_collective(begin) + (bytes ? ", " + bytes_text(bytes) : "");
}

void MasterState::abort_collective(Group& group, uint32_t seq, Errc code, const std::string& reason) {
  auto it = group.collectives.find(seq);
  if (it == group.collectives.end() || it->second.verdict) return;
  Collective& c = it->second;
  c.verdict = wire::CollectiveResult{group.epoch, seq, static_cast<uint32_t>(code), wire::bounded_reason(reason)};
  group.failed_in_epoch = true;
  ++stats_.aborted_by_result[static_cast<size_t>(code)];
  record_verdict(group, c, code);
  journal_.event(now_ms_, "abort", group.id, std::nullopt,
                 "group " + std::to_string(group.id) + " collective " + std::to_string(seq) + " aborted, " +
                     std::string(errc_name(code)) + ": " + reason);
  // The one line per outcome that is not a success (a verdict is given once: see above).
  if (log().should_log(spdlog::level::info))
    log().info("collective: group {} epoch {} collective {} ({}) aborted, {}: {}", group.id, group.epoch, seq,
               collective_text(c), errc_name(code), reason);
  for (const auto& [id, begin] : c.begins) send(id, *c.verdict);
  // Members still to begin hear the verdict when they do; a broken ring answers them anyway.
  if (c.begins.size() == group.ring.size() || group.broken) erase_collective(group, it);
}

void MasterState::abort_all_collectives(Group& group, Errc code, const std::string& reason,
                                        const std::set<uint32_t>& spared) {
  std::vector<uint32_t> open;
  for (const auto& [seq, c] : group.collectives)
    if (!c.verdict && !spared.count(seq)) open.push_back(seq);
  for (uint32_t seq : open) abort_collective(group, seq, code, reason);
  if (!group.broken) return;
  // A broken ring answers members that begin later by itself: the aborted records can go.
  for (auto it = group.collectives.begin(); it != group.collectives.end();)
    if (it->second.verdict) erase_collective(group, it++);
    else ++it;
}

void MasterState::collectives_lose(Group& group, PeerId lost, const std::string& reason) {
  std::set<uint32_t> going_on;
  for (auto& [seq, c] : group.collectives) {
    if (c.verdict || !sync_outlives(group, c)) continue;
    c.begins.erase(lost);
    c.sync_begins.erase(lost);
    c.ended_ok.erase(lost);
    c.plans.erase(lost);
    going_on.insert(seq);
    log().info("phase: group {} epoch {} shared-state sync {} goes on without {}: every member still fetching has "
               "a live holder",
               group.id, group.epoch, seq, peer_name(lost));
  }
  abort_all_collectives(group, Errc::peer_lost, reason, going_on);
  for (uint32_t seq : going_on)
    if (auto it = group.collectives.find(seq); it != group.collectives.end() && it->second.ended_ok.size() == group.ring.size())
      commit_collective(group, it);
}

// Called with the lost member already out of the ring. A sync's fetches never
// touch the ring's links, so the survivors can finish it when each of them
// that is still fetching has a holder left for everything it fetches (its
// FetchQueue moves a dead holder's chunks to the others).
bool MasterState::sync_outlives(const Group& group, const Collective& c) const {
  if (!c.go_sent || !c.elected_revision) return false;
  for (const auto& [id, plan] : c.plans) {
    if (!contains(group.ring, id) || c.ended_ok.count(id)) continue;
    for (const wire::SyncFetch& f : plan.fetches)
      if (std::none_of(f.holders.begin(), f.holders.end(), [&](uint64_t h) { return contains(group.ring, h); }))
        return false;
  }
  return true;
}

void MasterState::erase_collective(Group& group, std::map<uint32_t, Collective>::iterator it) {
  for (const auto& [id, begin] : it->second.begins) {
    auto pit = peers_.find(id);
    if (pit == peers_.end()) continue;
    --pit->second.open_collectives;
    if (it->second.sync_begins.count(id)) --pit->second.open_syncs;
  }
  group.collectives.erase(it);
}

void MasterState::clear_collectives(Group& group) {
  while (!group.collectives.empty()) erase_collective(group, group.collectives.begin());
  group.failed_in_epoch = false;
}

// --- link measurements -----------------------------------------------------------

void MasterState::handle(Peer& peer, const wire::LinkReport& m) {
  if (peer.phase != Phase::accepted)
    return kick(peer.conn, Errc::protocol, "link report from a peer that is not accepted");
  for (const wire::LinkEntry& e : m.links)
    if (e.from_peer != peer.id) return kick(peer.conn, Errc::protocol, "a link report may only hold the sender's links");
  Group& group = group_of(peer);
  group.links.record(peer.id, m.links, group.ring, now_ms_);
}

void MasterState::handle(Peer& peer, const wire::LinkMatrixQuery& m) {
  if (peer.phase != Phase::accepted)
    return kick(peer.conn, Errc::protocol, "link matrix query from a peer that is not accepted");
  send(peer.id, wire::LinkMatrix{m.request, link_matrix(peer.group)});
}

std::vector<wire::LinkEntry> MasterState::link_matrix(uint32_t group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return {};
  it->second.links.expire(now_ms_, limits_.link_max_age_ms);
  return it->second.links.entries(now_ms_, wire::kMaxLinkMatrixEntries);
}

// --- leaving -------------------------------------------------------------------

void MasterState::kick(ConnId conn, Errc code, const std::string& reason) {
  auto it = connections_.find(conn);
  if (it == connections_.end()) return;
  if (it->second.peer) {
    ++stats_.kicked;
    log().warn("kick: {}: {}", who(*it->second.peer), reason);
    const PeerId id = *it->second.peer;
    journal_.event(now_ms_, "kick", peers_.at(id).group, id, who(id) + " kicked: " + reason);
  } else if (uint64_t events = stranger_kicks_log_.admit(LogThrottle::Clock::time_point(std::chrono::milliseconds(now_ms_)))) {
    // Strangers come in storms: one line a second stands for all of them.
    log().warn("kick: {} connection(s) before their hello; last from {}: {}", events, it->second.remote_host, reason);
  }
  effects_.closes.push_back({conn, wire::Kick{static_cast<uint32_t>(code), wire::bounded_reason(reason)}, reason});
  drop_connection(conn, "kicked: " + reason);
}

void MasterState::forget_revision_holder(Group& group, PeerId id) {
  if (!group.revision_holders.erase(id) || !group.revision_holders.empty() || !group.shared_revision) return;
  const std::string revision = std::to_string(*group.shared_revision);
  group.shared_revision.reset();
  // The last member of all leaving is how every run ends: worth a line, not a warning.
  const bool members_left = std::any_of(peers_.begin(), peers_.end(), [&](const auto& p) {
    return p.first != id && p.second.group == group.id;
  });
  if (!members_left) {
    log().info("group {} ended at shared-state revision {}: its last member {} left", group.id, revision,
               peer_name(id));
    return;
  }
  const std::string what = "group " + std::to_string(group.id) + " lost its shared state at revision " + revision +
                           " with " + peer_name(id) +
                           ", its last holder; the next sync takes the highest revision its members offer";
  log().warn("{}", what);
  journal_.event(now_ms_, "revision", group.id, id, what);
}

void MasterState::remove_peer(PeerId id, const std::string& reason) {
  auto pit = peers_.find(id);
  if (pit == peers_.end()) return;
  const std::string name = who(id);
  Peer peer = pit->second;
  peers_.erase(pit);
  if (auto cit = connections_.find(peer.conn); cit != connections_.end()) {
    effects_.closes.push_back({peer.conn, std::nullopt, reason});
    connections_.erase(cit);
  }
  if (peer.phase == Phase::pending) {
    auto it = pending_by_source_.find(peer.source);
    if (--it->second == 0) pending_by_source_.erase(it);
  }
  Group& group = groups_[peer.group];
  maybe_idle_.insert(group.id);
  log().info("leave: {} (group {}): {}", name, group.id, reason);
  erase_value(group.waiting, id);
  if (group.resume) group.resume->awaiting.erase(id);
  forget_revision_holder(group, id);
  group.links.forget(id);
  group.topology_votes.erase(id);
  group.pending_queries.erase(id);
  if (contains(group.ring, id)) {
    erase_value(group.ring, id);
    group.broken = true;
    collectives_lose(group, id, name + " was lost: " + reason);
  }
  if (group.settling) return;  // settle_proposal proposes once, when every culprit is gone
  if (group.proposal && contains(group.proposal->members, id)) {
    log().info("phase: group {} epoch {} lost {}; proposing again", group.id, group.proposal->epoch,
                 peer_name(id));
    group.proposal.reset();
    start_proposal(group);
    return;
  }
  if (group.ring.empty() && !group.proposal && !group.waiting.empty()) return start_proposal(group);
  maybe_complete_votes(group);
}

std::string MasterState::who(PeerId id) const {
  auto it = peers_.find(id);
  if (it == peers_.end()) return peer_name(id);
  const Peer& peer = it->second;
  const std::string& host = peer.endpoint.host.empty() ? peer.source : peer.endpoint.host;
  const std::string where = peer_name(id) + (host.empty() ? "" : " at " + host);
  if (auto g = groups_.find(peer.group); g != groups_.end()) {
    const auto& ring = g->second.ring;
    if (auto pos = std::find(ring.begin(), ring.end(), id); pos != ring.end())
      return "rank " + std::to_string(pos - ring.begin()) + " (" + where + ")";
  }
  return where;
}

std::string MasterState::members_without(const Group& group, const std::function<bool(PeerId)>& has) const {
  std::string out;
  for (PeerId id : group.ring)
    if (!has(id)) out += (out.empty() ? "" : ", ") + who(id);
  return out;
}

// Erased only between events: a handler may still hold a reference to its group.
void MasterState::forget_idle_groups() {
  for (uint32_t id : maybe_idle_) {
    auto it = groups_.find(id);
    if (it != groups_.end() && it->second.ring.empty() && it->second.waiting.empty() && !it->second.proposal)
      groups_.erase(it);
  }
  maybe_idle_.clear();
}

// --- helpers -------------------------------------------------------------------

void MasterState::send(PeerId id, wire::Message message) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  effects_.sends.push_back({it->second.conn, std::move(message)});
}

void MasterState::send_all(const std::vector<PeerId>& ids, const wire::Message& message) {
  for (PeerId id : ids) send(id, message);
}

std::vector<PeerId> MasterState::ring(uint32_t group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? std::vector<PeerId>{} : it->second.ring;
}

std::vector<PeerId> MasterState::pending(uint32_t group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? std::vector<PeerId>{} : it->second.waiting;
}

uint64_t MasterState::epoch(uint32_t group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? 0 : it->second.epoch;
}

std::optional<uint64_t> MasterState::shared_revision(uint32_t group) const {
  auto it = groups_.find(group);
  return it == groups_.end() ? std::nullopt : it->second.shared_revision;
}

bool MasterState::ring_broken(uint32_t group) const {
  auto it = groups_.find(group);
  return it != groups_.end() && it->second.broken;
}

}  // namespace ferry::master
