// MasterState::view(): the run as the people watching it see it (run_view.h).
#include <algorithm>
#include <limits>

#include "master/master_state.h"
#include "master/master_stats.h"
#include "net/endpoint.h"

namespace ferry::master {

namespace {

// A view of a large group stays a few hundred KB of JSON: links beyond this are left out.
constexpr size_t kMaxViewLinks = 4096;

}  // namespace

std::optional<double> MasterState::bottleneck_of(Group& group, const std::vector<PeerId>& order) {
  if (order.size() < 2) return std::nullopt;
  double smallest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < order.size(); ++i) {
    const double capacity = group.links.capacity(order[i], order[(i + 1) % order.size()]);
    if (capacity <= 0) return std::nullopt;  // a hop not measured (or unreachable): no figure to give
    // A shared-memory hop is never the bottleneck, and its capacity is a stand-in, not a figure to show.
    if (capacity < LinkMatrix::kSharedMemoryCapacity) smallest = std::min(smallest, capacity);
  }
  if (smallest == std::numeric_limits<double>::infinity()) return std::nullopt;  // all on one host
  return smallest;
}

void MasterState::handle(Peer& peer, const wire::PeerLabel& m) {
  // Any peer past its hello may label itself, a joiner too: its cell says what it is waiting with.
  if (std::string problem = wire::label_problem(m.label); !problem.empty())
    return kick(peer.conn, Errc::protocol, problem);
  peer.label = m.label;
}

RunView MasterState::view() {
  RunView view;
  view.now_ms = now_ms_;
  view.connections = connections_.size();
  for (auto& [id, group] : groups_) {
    group.links.expire(now_ms_, limits_.link_max_age_ms);
    GroupView g;
    g.id = id;
    g.epoch = group.epoch;
    g.broken = group.broken;
    g.shared_revision = group.shared_revision;
    g.ring = group.ring;
    for (size_t i = 0; i < group.relays.size() && i < group.ring.size(); ++i)
      if (group.relays[i] != 0)
        g.relayed_hops.push_back({group.ring[i], group.ring[(i + 1) % group.ring.size()], group.relays[i]});
    g.waiting = group.waiting;
    g.voting.assign(group.topology_votes.begin(), group.topology_votes.end());
    g.ring_bottleneck_Bps = bottleneck_of(group, group.ring);
    std::vector<PeerId> arrival = group.ring;
    std::sort(arrival.begin(), arrival.end());
    g.arrival_bottleneck_Bps = bottleneck_of(group, arrival);
    for (const auto& [seq, c] : group.collectives) {
      if (c.verdict || c.begins.empty()) continue;
      const wire::CollectiveBegin& begin = c.begins.begin()->second;
      InFlightView f;
      f.seq = seq;
      f.kind = begin.kind;
      f.tag = begin.tag;
      f.bytes = collective_bytes(begin);
      f.transferring = c.go_sent;
      f.started_ms = c.first_begin_ms;
      for (PeerId member : group.ring)
        if (c.go_sent ? !c.ended_ok.count(member) : !c.begins.count(member)) f.waiting_for.push_back(member);
      g.in_flight.push_back(std::move(f));
    }
    for (const wire::LinkEntry& e : group.links.entries(now_ms_, kMaxViewLinks)) {
      LinkView l;
      l.from = e.from_peer;
      l.to = e.to_peer;
      l.shared_memory = e.shared_memory != 0;
      l.bandwidth_Bps = std::max(0.0, group.links.capacity(e.from_peer, e.to_peer));
      l.rtt_s = group.links.rtt_ms(e.from_peer, e.to_peer) / 1000;
      l.age_ms = e.age_ms;
      g.links.push_back(l);
    }
    for (const auto& [from, to] : group.links.unreachable_pairs(kMaxViewLinks - g.links.size()))
      g.links.push_back({from, to, /*unreachable=*/true, false, 0, 0, 0});
    view.groups.push_back(std::move(g));
  }
  for (const auto& [id, peer] : peers_) {
    PeerView p;
    p.id = id;
    p.group = peer.group;
    p.address = net::Endpoint{peer.endpoint.host, peer.endpoint.port}.to_string();
    p.host = peer.source;
    p.member = peer.phase == Phase::accepted;
    if (auto g = groups_.find(peer.group); g != groups_.end()) {
      const auto& ring = g->second.ring;
      if (auto pos = std::find(ring.begin(), ring.end(), id); pos != ring.end())
        p.rank = static_cast<uint32_t>(pos - ring.begin());
    }
    p.joined_ms = peer.joined_ms;
    p.heard_ms = peer.heard_ms;
    p.collectives_ok = peer.collectives_ok;
    p.collectives_failed = peer.collectives_failed;
    p.label = peer.label;
    view.peers.push_back(std::move(p));
  }
  return view;
}

}  // namespace ferry::master
