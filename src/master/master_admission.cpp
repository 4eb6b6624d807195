// Admission: a hello is checked (proof, parameters), refused while its source
// is in back-off or its source or group has too many joiners waiting, and
// otherwise welcomed as a pending peer (the rules in master_state.h).
#include <algorithm>

#include "core/auth_labels.h"
#include "core/log.h"
#include "master/master_state.h"
#include "master/master_log.h"
#include "master/peer_ids.h"
#include "net/host_addresses.h"

namespace ferry::master {

void MasterState::on_hello(ConnId conn, const wire::Hello& hello) {
  Connection& from = connections_.at(conn);
  if (secret_ && !secret_->verify(hello.proof, auth_label::kPeerToMaster, from.nonce, hello.nonce))
    return kick(conn, Errc::auth, "authentication failed: no valid proof of the run secret");
  if (hello.p2p_connections == 0 || hello.p2p_connections > wire::kMaxConnectionsPerLink)
    return kick(conn, Errc::invalid_argument,
                "p2p_connections must be 1.." + std::to_string(wire::kMaxConnectionsPerLink));
  if (hello.advertised_port == 0 && !hello.dial_out_only)
    return kick(conn, Errc::invalid_argument, "advertised p2p port is 0");
  if (hello.advertised_port != 0 && hello.dial_out_only)
    return kick(conn, Errc::invalid_argument, "a dial-out-only peer advertises no p2p port");
  if (hello.relay_port != 0 && hello.dial_out_only)
    return kick(conn, Errc::invalid_argument, "a dial-out-only peer cannot relay (it advertised a relay port)");
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
  ++pending_by_source_[peer.source];
  master_log().info("join: {} (group {}, p2p {}:{}, {} connections) is pending", peer_name(peer.id),
                    group.id, peer.endpoint.host, peer.endpoint.port, peer.connections);
  journal_.event(now_ms_, "join", group.id, peer.id, who(peer.id) + " joined group " + std::to_string(group.id));
  if (!peer.dial_out_only && limits_.reachability_check_ms > 0) {
    peer.checking_reachability = true;  // offered to the group once the answer comes (on_reachability)
    effects_.reachability_checks.push_back(
        {peer.id, peer.endpoint.host, peer.endpoint.port, limits_.reachability_check_ms});
    return;
  }
  group.waiting.push_back(peer.id);
  offer_to_group(group);
}

void MasterState::on_reachability(PeerId id, bool reachable) {
  auto it = peers_.find(id);
  if (it == peers_.end() || !it->second.checking_reachability) return;
  Peer& peer = it->second;
  peer.checking_reachability = false;
  if (!reachable) {
    peer.dial_out_only = true;
    peer.endpoint.relay_port = 0;  // nobody could dial it to be relayed
    master_log().info("join: {} cannot be dialed at {}:{} (the master's dial got no connection within {} ms): "
                      "treated as dial-out-only (behind NAT or an inbound firewall), its links dialed from its side",
                      peer_name(id), peer.endpoint.host, peer.endpoint.port, limits_.reachability_check_ms);
  }
  Group& group = groups_[peer.group];
  group.waiting.push_back(id);
  offer_to_group(group);
}

void MasterState::offer_to_group(Group& group) {
  // Nobody to ask: an empty group admits its first peers at once.
  if (group.ring.empty() && !group.proposal) return start_proposal(group);
  maybe_complete_votes(group);  // a vote held until enough newcomers wait may be decided now
}

Peer& MasterState::add_peer(ConnId conn, const wire::Hello& hello, PeerId id, uint32_t timeout) {
  Connection& c = connections_.at(conn);
  Peer peer;
  peer.id = id;
  peer.conn = conn;
  peer.group = hello.peer_group;
  peer.connections = hello.p2p_connections;
  peer.source = c.remote_host;
  peer.silent_link_ms = hello.silent_link_ms;
  peer.dial_out_only = hello.dial_out_only != 0;
  peer.joined_ms = peer.heard_ms = now_ms_;
  peer.endpoint.peer_id = peer.id;
  peer.endpoint.host = hello.advertised_host.empty() ? c.remote_host : hello.advertised_host;
  peer.endpoint.port = hello.advertised_port;
  peer.endpoint.relay_port = hello.relay_port;
  peer.endpoint.other_hosts = net::other_family_addresses(peer.endpoint.host, hello.other_hosts, wire::kMaxOtherHosts);
  c.peer = peer.id;
  effects_.deadlines.push_back({conn, timeout});
  std::string proof = secret_ ? secret_->proof(auth_label::kMasterToPeer, hello.nonce, c.nonce) : std::string();
  Peer& added = peers_[peer.id] = peer;
  send(peer.id, wire::Welcome{.peer_id = peer.id, .observed_host = c.remote_host, .proof = proof});
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

}  // namespace ferry::master
