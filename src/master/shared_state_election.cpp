#include "master/shared_state_election.h"

#include <algorithm>

#include "master/peer_ids.h"
#include "wire/fetch_frames.h"
#include <optional>
#include <set>

namespace ferry::master {
namespace {

using wire::SyncStrategy;

std::string describe(const wire::TensorDigest& t) {
  return "'" + t.name + "' (dtype " + std::to_string(t.dtype) + ", " + std::to_string(t.count) + " elements" +
         (t.allow_inequality ? ", may differ" : "") + ")";
}

// Each candidate's tensors in name order; fails on duplicate names.
Status sorted_tensors(const SyncCandidate& c, std::vector<wire::TensorDigest>& out) {
  out = c.begin.tensors;
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].name == out[i - 1].name)
      return Status::failure(Errc::invalid_argument, peer_name(c.peer_id) + " names two tensors '" + out[i].name + "'");
  return Status::success();
}

}  // namespace

ElectionOutcome elect_shared_state(const std::vector<SyncCandidate>& candidates, bool group_has_revision,
                                   uint64_t group_revision, const SyncReach& reach) {
  ElectionOutcome out;
  if (candidates.empty()) {
    out.status = Status::failure(Errc::internal, "shared-state election without members");
    return out;
  }
  // Layouts: identical everywhere.
  std::vector<std::vector<wire::TensorDigest>> tensors(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i)
    if (Status st = sorted_tensors(candidates[i], tensors[i]); !st.ok()) {
      out.status = st;
      return out;
    }
  for (size_t i = 1; i < candidates.size(); ++i) {
    const auto &a = tensors[0], &b = tensors[i];
    for (size_t t = 0; t < std::max(a.size(), b.size()); ++t) {
      bool same = t < a.size() && t < b.size() && a[t].name == b[t].name && a[t].dtype == b[t].dtype &&
                  a[t].count == b[t].count && a[t].allow_inequality == b[t].allow_inequality;
      if (same) continue;
      out.status = Status::failure(
          Errc::mismatch, "shared state differs in layout: " + peer_name(candidates[0].peer_id) + " has " +
                              (t < a.size() ? describe(a[t]) : "no more tensors") + ", " +
                              peer_name(candidates[i].peer_id) + " has " +
                              (t < b.size() ? describe(b[t]) : "no more tensors"));
      return out;
    }
  }

  // The revision rule.
  bool any_contributor = false;
  uint64_t target = 0;
  for (const auto& c : candidates)
    if (c.begin.strategy != static_cast<uint8_t>(SyncStrategy::receive_only)) {
      target = any_contributor ? std::max(target, c.begin.revision) : c.begin.revision;
      any_contributor = true;
    }
  if (!any_contributor) {
    out.status = Status::failure(Errc::invalid_usage, "every peer syncs shared state receive-only: nobody offers it");
    return out;
  }
  if (group_has_revision && target != group_revision + 1) {
    out.status = Status::failure(Errc::invalid_usage, "shared-state revision must grow by exactly one per sync: the group is at " +
                                                          std::to_string(group_revision) + ", the peers offer " +
                                                          std::to_string(target));
    return out;
  }
  std::vector<bool> eligible(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto& b = candidates[i].begin;
    bool contributor = b.strategy != static_cast<uint8_t>(SyncStrategy::receive_only);
    eligible[i] = contributor && b.revision == target;
    if (b.strategy == static_cast<uint8_t>(SyncStrategy::send_only) && b.revision != target) {
      out.status = Status::failure(Errc::invalid_usage, "send-only " + peer_name(candidates[i].peer_id) +
                                                            " is at revision " + std::to_string(b.revision) +
                                                            ", behind the group's " + std::to_string(target));
      return out;
    }
  }

  // Per tensor: the winning bytes and who holds them.
  std::set<uint64_t> kicked;
  for (size_t i = 0; i < candidates.size(); ++i) {
    wire::SyncPlan& plan = out.plans[candidates[i].peer_id];
    plan.epoch = candidates[i].begin.epoch;
    plan.seq = candidates[i].begin.seq;
    plan.revision = target;
  }
  // Who opens the connections of a fetch from `holder` by `fetcher`, if anyone can.
  auto dial_of = [&](uint64_t fetcher, uint64_t holder) -> std::optional<wire::FetchDial> {
    if (reach.can_dial(fetcher, holder)) return wire::FetchDial::fetcher;
    if (reach.can_dial(holder, fetcher)) return wire::FetchDial::holder;
    if (reach.can_punch(fetcher, holder)) return wire::FetchDial::both;
    return std::nullopt;
  };
  std::map<uint64_t, size_t> index_of;
  for (size_t i = 0; i < candidates.size(); ++i) index_of[candidates[i].peer_id] = i;
  std::map<std::pair<uint64_t, uint64_t>, wire::FetchDial> links;  // (fetcher, holder) -> who dials
  for (size_t t = 0; t < tensors[0].size(); ++t) {
    if (tensors[0][t].allow_inequality) continue;
    std::optional<size_t> sender;  // index of the lowest-id send-only eligible member
    std::map<uint64_t, std::pair<size_t, uint64_t>> votes;  // hash -> (count, lowest peer id)
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!eligible[i]) continue;
      uint64_t h = tensors[i][t].hash, id = candidates[i].peer_id;
      auto& v = votes[h];
      v.second = v.first == 0 ? id : std::min(v.second, id);
      ++v.first;
      if (candidates[i].begin.strategy != static_cast<uint8_t>(SyncStrategy::send_only)) continue;
      if (!sender || id < candidates[*sender].peer_id) sender = i;
    }
    uint64_t winner = 0;
    if (sender) {
      winner = tensors[*sender][t].hash;
      for (size_t i = 0; i < candidates.size(); ++i)
        if (eligible[i] && candidates[i].begin.strategy == static_cast<uint8_t>(SyncStrategy::send_only) &&
            tensors[i][t].hash != winner) {
          kicked.insert(candidates[i].peer_id);
          out.kick_reason = "send-only shared state conflicts with send-only " + peer_name(candidates[*sender].peer_id) +
                            " on tensor '" + tensors[0][t].name + "'";
        }
    } else {
      auto best = std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) {
        if (a.second.first != b.second.first) return a.second.first < b.second.first;
        return a.second.second > b.second.second;  // on a tie the lowest peer id wins
      });
      winner = best->first;
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (tensors[i][t].hash == winner) continue;
      if (eligible[i] && candidates[i].begin.strategy == static_cast<uint8_t>(SyncStrategy::send_only)) continue;
      const uint64_t id = candidates[i].peer_id;
      // Holders a connection reaches directly; punched ones only when there is none
      // (a punch into a host that drops every SYN costs a whole connect timeout).
      std::vector<std::pair<uint64_t, wire::FetchDial>> direct, punched;
      for (size_t h = 0; h < candidates.size(); ++h)
        if (eligible[h] && tensors[h][t].hash == winner)
          if (auto dial = dial_of(id, candidates[h].peer_id))
            (*dial == wire::FetchDial::both ? punched : direct).emplace_back(candidates[h].peer_id, *dial);
      const auto& holders = direct.empty() ? punched : direct;
      if (holders.empty()) {
        out.status = Status::failure(Errc::connect, "tensor '" + tensors[0][t].name + "' is held only by peers that " +
                                                        peer_name(id) + " cannot connect to, nor they to it");
        return out;
      }
      wire::SyncPlan& plan = out.plans[id];
      wire::SyncFetch fetch{.tensor = static_cast<uint32_t>(t), .hash = winner, .holders = {}};
      for (auto [holder, dial] : holders) {
        fetch.holders.push_back(holder);
        if (!links.emplace(std::pair{id, holder}, dial).second) continue;
        plan.addresses.push_back(candidates[index_of.at(holder)].address);
        plan.holder_dials.push_back(static_cast<uint8_t>(dial));
      }
      plan.fetches.push_back(std::move(fetch));
    }
  }
  // Each holder learns whom it serves: fetchers that dial it, by name; those it connects to, with the
  // number of connections each fetcher waits for (its share of kMaxFetchConnections, as it computes it).
  for (const auto& [pair, dial] : links) {
    const auto [fetcher, holder] = pair;
    wire::SyncPlan& plan = out.plans[holder];
    if (dial == wire::FetchDial::fetcher) {
      plan.serve_to.push_back(fetcher);
      continue;
    }
    const SyncCandidate& f = candidates[index_of.at(fetcher)];
    plan.serve_dials.push_back({.fetcher = f.address,
                                .dial = static_cast<uint8_t>(dial),
                                .connections = wire::fetch_connections_per_holder(
                                    f.begin.connections, out.plans[fetcher].addresses.size())});
  }
  if (!kicked.empty()) {
    out.kick.assign(kicked.begin(), kicked.end());
    out.status = Status::failure(Errc::peer_lost, out.kick_reason);
    return out;
  }
  out.revision = target;
  out.status = Status::success();
  return out;
}

}  // namespace ferry::master
