// Proposals: who a new ring holds and in which order (ring_choice.h), the
// members' answers and their verdict (ring_verdict.h), reroutes around failed
// links, probe rounds of the pairs nobody measured (probe_plan.h), and the
// commit (the rules in master_state.h, "Membership").
#include <algorithm>
#include <numeric>

#include "core/log.h"
#include "master/link_dialers.h"
#include "master/master_state.h"
#include "master/peer_ids.h"
#include "master/ring_verdict.h"

namespace ferry::master {
namespace {

// The proposal's link between from and to (either direction), if it has one.
std::optional<size_t> link_between(const Proposal& p, PeerId from, PeerId to) {
  const size_t n = p.members.size();
  for (size_t i = 0; i < n; ++i) {
    PeerId a = p.members[i], b = p.members[(i + 1) % n];
    if ((a == from && b == to) || (a == to && b == from)) return i;
  }
  return std::nullopt;
}

wire::LinkDial dial_of(const Proposal& p, std::optional<size_t> link) {
  return link && *link < p.receiver_dials.size() ? static_cast<wire::LinkDial>(p.receiver_dials[*link])
                                                 : wire::LinkDial::sender;
}

}  // namespace

void MasterState::start_proposal(Group& group, std::vector<PeerId> order) {
  Proposal proposal;
  proposal.epoch = next_epoch_++;
  bool ordered = !order.empty();
  if (ordered) {
    proposal.members = std::move(order);
  } else {
    std::vector<PeerId> unplaceable;  // accepted members no ring avoiding the unreachable pairs can hold
    proposal.members = placeable(group, &unplaceable);
    for (PeerId id : group.waiting)
      if (!contains(proposal.members, id))
        log().info("join: {} waits: no ring with it avoids every pair that cannot connect", peer_name(id));
    std::string names;
    for (PeerId id : unplaceable) names += (names.empty() ? "" : ", ") + peer_name(id);
    // evict, not kick: this proposal is the group's answer to losing them.
    for (PeerId id : unplaceable)
      evict(id, Errc::connect,
            "no ring of the group avoids every pair that cannot connect, and leaving out " + names +
                " is the fewest peers that makes one possible");
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

bool MasterState::can_dial(const Group& group, PeerId from, PeerId to) const {
  return !peers_.at(to).dial_out_only && !group.links.dial_failed(from, to);
}

bool MasterState::can_punch(const Group& group, PeerId a, PeerId b) const {
  return group.punching && !group.links.punch_failed(a, b);
}

RelayReach MasterState::relay_reach(const Group& group) const {
  return {.can_dial = [this, &group](PeerId from, PeerId to) { return can_dial(group, from, to); },
          .relays = [this](PeerId member) { return peers_.at(member).endpoint.relay_port != 0; },
          .failed = [&group](PeerId a, PeerId b, PeerId relay) { return group.links.relay_failed(a, b, relay); },
          .capacity = [&group](PeerId from, PeerId to) { return group.links.measured_capacity(from, to); }};
}

RingProblem MasterState::ring_problem(Group& group, const std::vector<PeerId>& members) {
  group.links.expire(now_ms_, limits_.link_max_age_ms);
  RingProblem problem = RingProblem::sized(members.size());
  const CanDial dial = [&](PeerId from, PeerId to) { return can_dial(group, from, to); };
  const RelayReach relays = relay_reach(group);
  std::vector<uint8_t>& relayed = problem.relayed;
  relayed.assign(members.size() * members.size(), 0);
  double longest = 0;
  for (size_t a = 0; a < members.size(); ++a)
    for (size_t b = 0; b < members.size(); ++b)
      if (a != b) {
        // A pair either end can dial, or that may punch, carries data both ways (link_dialers.h).
        problem.bw(a, b) = linkable(members[a], members[b], dial) || can_punch(group, members[a], members[b])
                               ? group.links.measured_capacity(members[a], members[b])
                               : -1;
        if (problem.bw(a, b) < 0 && group.relaying)
          if (auto through = relayed_capacity(members[a], members[b], members, relays)) {
            problem.bw(a, b) = *through;
            relayed[a * members.size() + b] = 1;
          }
        problem.rtt_ms[a * members.size() + b] = group.links.rtt_ms(members[a], members[b]);
        if (problem.bw(a, b) > 0) longest = std::max(longest, problem.rtt_ms[a * members.size() + b]);
      }
  // An unknown pair's RTT as the longest known one, as its rate is the slowest (ring_choice.h):
  // unmeasured must not look close. A relayed pair's as two of those: two hops, and among
  // rings of one bottleneck, the one with fewer relayed hops wins.
  for (size_t a = 0; a < members.size(); ++a)
    for (size_t b = 0; b < members.size(); ++b)
      if (a != b && (problem.bw(a, b) <= 0 || relayed[a * members.size() + b]))
        problem.rtt_ms[a * members.size() + b] = relayed[a * members.size() + b] ? 2 * longest + 1 : longest;
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
  // A relayed hop loads a third peer's links: as fast with fewer of them wins outright.
  bool fewer_relays = as_fast && relayed_hops(problem, best.order) < relayed_hops(problem, start);
  bool gains = fewer_relays ||
               (gain > 1 ? best.bottleneck >= given.bottleneck * gain ||
                               (as_fast && best.total_rtt_ms * gain < given.total_rtt_ms)
                         : best.order != given.order && (best.bottleneck > given.bottleneck ||
                                                         best.total_rtt_ms < given.total_rtt_ms));
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
  proposal.receiver_dials =
      assign_dialers(proposal.members, [&](PeerId from, PeerId to) { return can_dial(group, from, to); },
                     [&](PeerId a, PeerId b) { return can_punch(group, a, b); });
  proposal.relays = assign_relays(proposal.members, proposal.receiver_dials, relay_reach(group));
  for (size_t i = 0; i < proposal.relays.size(); ++i)
    if (proposal.relays[i] != 0)
      log().info("ring: group {} epoch {}: the link from {} to {} is relayed by {} (neither end can dial nor punch "
                 "through to the other)", group.id, proposal.epoch, peer_name(proposal.members[i]),
                 peer_name(proposal.members[(i + 1) % proposal.members.size()]), peer_name(proposal.relays[i]));
  topology.receiver_dials = proposal.receiver_dials;
  topology.relays = proposal.relays;
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
  for (size_t i = 0; i < p.members.size(); ++i) {
    PeerId id = p.members[i];
    VerdictMember m{id, peers_.at(id).phase == Phase::accepted, std::nullopt};
    // A punched or relayed link (LinkDial::both, relay) is judged as one its sender dials.
    m.next_dials = i < p.receiver_dials.size() && p.receiver_dials[i] == static_cast<uint8_t>(wire::LinkDial::receiver);
    const wire::LinkDial dial = dial_of(p, i);
    m.next_mutual = dial == wire::LinkDial::both || dial == wire::LinkDial::relay;
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
  // evict, not kick: the group proposes once, below, when every culprit is gone, not once per culprit.
  for (const Culprit& culprit : verdict->culprits) {
    const Peer& peer = peers_.at(culprit.id);
    std::string why = "evicted from the ring of epoch " + std::to_string(epoch) + ": " + culprit.why;
    if (peer.phase == Phase::pending) note_backoff(peer.source);
    evict(culprit.id, Errc::connect, why);
  }
  start_proposal(group);  // ordered around every unreachable pair (better_ring)
}

void MasterState::reroute(Group& group, const Verdict& verdict) {
  ++group.reroutes;
  const LinkMatrix::Backoff backoff{limits_.unreachable_retry_ms, limits_.unreachable_retry_max_ms};
  for (const FailedLink& link : verdict.failed_links) {
    const std::optional<size_t> between = link_between(*group.proposal, link.from, link.to);
    if (dial_of(*group.proposal, between) == wire::LinkDial::relay && *between < group.proposal->relays.size()) {
      const PeerId relay = group.proposal->relays[*between];
      uint64_t wait = group.links.mark_relay_failed(link.from, link.to, relay, now_ms_, backoff);
      log().warn("ring: group {}: the link between {} and {} relayed by {} failed ({}); that relay is not asked "
                 "for the pair for {} s", group.id, peer_name(link.from), peer_name(link.to), peer_name(relay),
                 link.why, wait / 1000);
      continue;
    }
    if (dial_of(*group.proposal, between) == wire::LinkDial::both) {
      uint64_t wait = group.links.mark_punch_failed(link.from, link.to, now_ms_, backoff);
      log().warn("ring: group {}: {} and {} could not punch through to each other ({}); rings avoid that pair "
                 "for {} s", group.id, peer_name(link.from), peer_name(link.to), link.why, wait / 1000);
      continue;
    }
    uint64_t wait = group.links.mark_unreachable(link.from, link.to, now_ms_, backoff);
    log().warn("ring: group {}: {} cannot reach {} ({}); rings avoid that pair for {} s", group.id,
               peer_name(link.from), peer_name(link.to), link.why, wait / 1000);
  }
}

std::vector<PeerId> MasterState::placeable(Group& group, std::vector<PeerId>* evict) {
  std::vector<PeerId> members = group.ring;
  for (PeerId id : group.waiting)
    if (!contains(members, id)) members.push_back(id);
  // Direct links first; pairs that may punch only when no ring of direct links holds everyone;
  // relays only when no ring of direct and punched links does.
  group.punching = false;
  group.relaying = false;
  RingProblem problem = ring_problem(group, members);
  if (std::none_of(problem.bandwidth.begin(), problem.bandwidth.end(), [](double bw) { return bw < 0; })) return members;
  // Keeping an accepted member is worth more than keeping a joiner; among equals, the older stays.
  std::vector<double> keep_weight;
  for (PeerId id : members)
    keep_weight.push_back((peers_.at(id).phase == Phase::accepted ? 1e6 : 0) + 1.0 / static_cast<double>(id));
  // Both searches share one budget: a vote waits for this on the master's thread.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                      give_up - std::chrono::steady_clock::now()));
  };
  std::vector<size_t> drop = fewest_to_drop(problem, keep_weight, left());
  if (drop.empty()) return members;
  if (limits_.punch) {
    group.punching = true;
    problem = ring_problem(group, members);
    drop = fewest_to_drop(problem, keep_weight, left());
    if (drop.empty()) return members;
  }
  group.relaying = true;
  problem = ring_problem(group, members);
  drop = fewest_to_drop(problem, keep_weight, left());
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
      p.members,
      // A probe's connections are dialed by whichever end can (the target, when it accepts none);
      // a pair neither end can dial is not probed.
      [&](PeerId from, PeerId to) {
        return group.links.has(from, to) || !linkable(from, to, [&](PeerId a, PeerId b) { return can_dial(group, a, b); });
      },
      limits_.max_probe_rounds);
  if (p.probe_rounds.empty()) return maybe_commit_proposal(group);
  p.probe_started_ms = now_ms_;
  log().debug("phase: group {} epoch {} probes {} rounds", group.id, p.epoch, p.probe_rounds.size());
  send_probe_round(group);
}

void MasterState::kick_silent_probers(Group& group) {
  if (!group.proposal || !group.proposal->probing || group.proposal->probe_waiting.empty()) return;
  if (now_ms_ - group.proposal->probe_round_started_ms < limits_.probe_round_timeout_ms) return;
  // An honest peer answers within its own bounds (link_probe.h); one that does not stalls the vote.
  // The first kick re-proposes (or ends the proposal): the round and the list are read before it.
  std::vector<PeerId> silent(group.proposal->probe_waiting.begin(), group.proposal->probe_waiting.end());
  const std::string why = "did not answer probe round " + std::to_string(group.proposal->probe_round) + " within " +
                          std::to_string(limits_.probe_round_timeout_ms) + " ms";
  for (PeerId peer : silent)
    if (auto it = peers_.find(peer); it != peers_.end()) kick(it->second.conn, Errc::protocol, why);
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
    wire::ProbeRound& prober = round_of(pair.from);
    prober.targets.push_back(peers_.at(pair.to).endpoint);
    round_of(pair.to).sources.push_back(pair.from);
    if (can_dial(group, pair.from, pair.to)) continue;
    // The target accepts no connection from its prober: it dials the prober instead.
    prober.target_dials.resize(prober.targets.size(), 0);
    prober.target_dials.back() = 1;
    round_of(pair.to).dial_sources.push_back(peers_.at(pair.from).endpoint);
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
    // The dial that failed: the prober's, or its target's where the target dialed (send_probe_round).
    const bool target_dialed = !can_dial(group, peer.id, to);
    group.links.mark_unreachable(target_dialed ? to : peer.id, target_dialed ? peer.id : to, now_ms_,
                                 {limits_.unreachable_retry_ms, limits_.unreachable_retry_max_ms});
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
  group.relays = p.relays;
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

}  // namespace ferry::master
