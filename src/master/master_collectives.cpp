// Collectives: every member begins one alike, all hear go (a shared-state
// sync: its elected plan), all end ok and it commits; anything else aborts it
// for every member alike (the rules in master_state.h, "Collectives").
#include <algorithm>

#include "core/log.h"
#include "master/collective_names.h"
#include "master/master_state.h"
#include "master/peer_ids.h"
#include "master/shared_state_election.h"

namespace ferry::master {

void MasterState::handle(Peer& peer, const wire::CollectiveBegin& m) {
  using Kind = wire::CollectiveKind;
  if (m.kind != static_cast<uint8_t>(Kind::allreduce) && m.kind != static_cast<uint8_t>(Kind::barrier) &&
      m.kind != static_cast<uint8_t>(Kind::broadcast) && m.kind != static_cast<uint8_t>(Kind::all_gather))
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
    send(peer.id, wire::CollectiveResult{.epoch = m.epoch,
                                         .seq = m.seq,
                                         .code = static_cast<uint32_t>(code),
                                         .reason = wire::bounded_reason(why)});
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
  if (!c.begins.empty() && c.begins.begin()->second.kind == static_cast<uint8_t>(wire::CollectiveKind::all_gather)) {
    // Every member's own size, in ring order: each one sizes its result and checks its chunks by them.
    wire::GatherGo go{.epoch = group.epoch, .seq = seq};
    for (PeerId id : group.ring) go.sizes.push_back(c.begins.at(id).count);
    return send_all(group.ring, go);
  }
  if (c.sync_begins.empty()) return send_all(group.ring, wire::CollectiveGo{.epoch = group.epoch, .seq = seq});
  std::vector<SyncCandidate> candidates;
  for (auto& [id, begin] : c.sync_begins) {
    const Peer& p = peers_.at(id);
    candidates.push_back({id, p.endpoint, begin});
  }
  // A fetch punches whenever no end can dial the other (unlike a ring, it has no
  // direct alternative to prefer), unless a punch between the two failed lately.
  const SyncReach reach{.can_dial = [&](PeerId from, PeerId to) { return can_dial(group, from, to); },
                        .can_punch = [&](PeerId a, PeerId b) { return !group.links.punch_failed(a, b); }};
  ElectionOutcome outcome = elect_shared_state(candidates, group.shared_revision.has_value(),
                                               group.shared_revision.value_or(0), reach);
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
  send_all(group.ring, wire::CollectiveResult{.epoch = group.epoch,
                                              .seq = it->first,
                                              .pending = static_cast<uint32_t>(group.waiting.size())});
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
  c.verdict = wire::CollectiveResult{
      .epoch = group.epoch, .seq = seq, .code = static_cast<uint32_t>(code), .reason = wire::bounded_reason(reason)};
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

}  // namespace ferry::master
