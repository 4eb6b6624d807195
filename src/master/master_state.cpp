// The state machine's frame: events in (connections, messages, the clock),
// effects out; each message to the file of its job (master_state.h lists
// them); a peer leaving, and how peers are named in messages.
#include "master/master_state.h"

#include <algorithm>

#include "core/log.h"
#include "master/master_log.h"
#include "master/peer_ids.h"

namespace ferry::master {

MasterState::MasterState(MasterLimits limits, std::optional<RunSecret> secret, uint64_t first_peer_id)
    : limits_(limits), secret_(std::move(secret)), next_peer_id_(std::max<uint64_t>(first_peer_id, 1)) {}

Effects MasterState::take_effects() { return std::exchange(effects_, {}); }

void MasterState::on_connected(ConnId conn, const std::string& remote_host, const std::string& nonce) {
  connections_[conn] = Connection{remote_host, nonce, std::nullopt};
  effects_.sends.push_back({conn, wire::AuthChallenge{.nonce = nonce, .required = secret_.has_value()}});
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
                      std::is_same_v<M, wire::ProbeDone> || std::is_same_v<M, wire::PeerLabel>) {
          handle(peer, m);
        } else {
          kick(conn, Errc::protocol,
               std::string("a peer may not send ") +
                   wire::message_type_name(static_cast<uint16_t>(M::kType)));
        }
      },
      message);
}

void MasterState::on_tick(uint64_t now_ms) {
  advance_clock(now_ms);
  for (auto& [id, group] : groups_) {
    maybe_settle(group);
    if (!group.topology_votes.empty()) maybe_complete_votes(group);  // a held vote's deadline may have passed
    // A blamed joiner's deadline may have passed: the answers in hand decide.
    if (group.proposal && !group.proposal->probing) settle_proposal(group);
    kick_silent_probers(group);
  }
  forget_idle_groups();
}

void MasterState::handle(Peer& peer, const wire::Leave&) {
  ++stats_.left;
  journal_.event(now_ms_, "leave", peer.group, peer.id, who(peer.id) + " left");
  remove_peer(peer.id, "left");
}

void MasterState::kick(ConnId conn, Errc code, const std::string& reason) {
  if (!connections_.count(conn)) return;
  close_with_kick(conn, code, reason);
  drop_connection(conn, "kicked: " + reason);
}

void MasterState::evict(PeerId id, Errc code, const std::string& reason) {
  const ConnId conn = peers_.at(id).conn;
  close_with_kick(conn, code, reason);
  connections_.erase(conn);
  forget_peer(id, "kicked: " + reason);
}

void MasterState::close_with_kick(ConnId conn, Errc code, const std::string& reason) {
  const Connection& c = connections_.at(conn);
  if (c.peer) {
    ++stats_.kicked;
    log().warn("kick: {}: {}", who(*c.peer), reason);
    const PeerId id = *c.peer;
    journal_.event(now_ms_, "kick", peers_.at(id).group, id, who(id) + " kicked: " + reason);
  } else if (uint64_t events = stranger_kicks_log_.admit(LogThrottle::Clock::time_point(std::chrono::milliseconds(now_ms_)))) {
    // Strangers come in storms: one line a second stands for all of them.
    log().warn("kick: {} connection(s) before their hello; last from {}: {}", events, c.remote_host, reason);
  }
  effects_.closes.push_back(
      {conn, wire::Kick{.code = static_cast<uint32_t>(code), .reason = wire::bounded_reason(reason)}, reason});
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
  if (Group* group = forget_peer(id, reason)) after_loss(*group, id);
}

Group* MasterState::forget_peer(PeerId id, const std::string& reason) {
  auto pit = peers_.find(id);
  if (pit == peers_.end()) return nullptr;
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
  master_log().info("leave: {} (group {}): {}", name, group.id, reason);
  erase_value(group.waiting, id);
  if (group.resume) group.resume->awaiting.erase(id);
  forget_revision_holder(group, id);
  group.links.forget(id);
  group.topology_votes.erase(id);
  group.pending_queries.erase(id);
  if (contains(group.ring, id)) {
    erase_value(group.ring, id);
    group.relays.clear();  // broken: the next proposal relays anew
    group.broken = true;
    collectives_lose(group, id, name + " was lost: " + reason);
  }
  return &group;
}

void MasterState::after_loss(Group& group, PeerId id) {
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
    if (it != groups_.end() && it->second.ring.empty() && it->second.waiting.empty() && !it->second.proposal) {
      groups_.erase(it);
      stats_.emptied_groups.insert(id);
    }
  }
  maybe_idle_.clear();
}

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
