// What the master_state_*.cpp tests share beyond master_fixture.h: resume
// hellos, votes in, the ring proposed, answers as a network with blocked
// pairs would give them, and the log captured.
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include "core/log.h"
#include "master/master_state.h"
#include "master_fixture.h"

namespace ferry::master::testing {

// What a member that lost its master says to the new one (hello.resume_*).
inline Hello resume_hello(const Fixture& f, ConnId conn, PeerId id, uint64_t epoch, std::vector<PeerId> ring,
                          std::vector<uint32_t> committed = {}, std::vector<uint32_t> awaiting = {}) {
  Hello h = f.hello_of(conn);
  h.resume_peer_id = id;
  h.resume_epoch = epoch;
  h.resume_ring = std::move(ring);
  h.resume_committed = seq_ranges(committed);
  h.resume_awaiting = seq_ranges(awaiting);
  return h;
}

// Conns 1..n (the accepted ring) vote; returns the epoch of the proposal that follows.
inline uint64_t vote_in(Fixture& f, ConnId n, uint8_t links_broken = 0) {
  for (ConnId c = 1; c <= n; ++c) f.state.on_message(c, TopologyVote{links_broken});
  f.step();
  auto proposals = f.sent<Topology>();
  REQUIRE_FALSE(proposals.empty());
  return proposals[0].second.epoch;
}

// The ring of the one proposal the last step sent, by conn: what every member got.
inline std::vector<uint64_t> proposed_ring(const Fixture& f) {
  auto proposals = f.sent<Topology>();
  std::vector<uint64_t> ids;
  if (!proposals.empty())
    for (auto& m : proposals[0].second.ring) ids.push_back(m.peer_id);
  return ids;
}

// Every member of the last proposal answers as a network where `blocked`
// ordered pairs (dialer, acceptor) cannot connect would have it: both ends of
// a link whose dial is blocked blame each other (the dialer's dial failed, the
// acceptor's lanes never came), a member's link to its next peer first. Each
// link is dialed as the proposal says (Topology::receiver_dials); a punched one
// fails where its pair is blocked either way, a relayed one where either end's dial of its relay is. Returns the proposal's ring.
inline std::vector<PeerId> answer_as_network(Fixture& f, const std::set<std::pair<PeerId, PeerId>>& blocked) {
  auto proposals = f.sent<Topology>();
  REQUIRE_FALSE(proposals.empty());
  const Topology& topology = proposals[0].second;
  std::vector<PeerId> ring;
  for (auto& m : topology.ring) ring.push_back(m.peer_id);
  const size_t n = ring.size();
  auto link_blocked = [&](size_t i) {  // the link from ring[i] to the next member
    PeerId from = ring[i], to = ring[(i + 1) % n];
    // A punched link needs both ends' SYNs through: a pair blocked either way is `closed` there.
    if (topology.link_dial(i) == LinkDial::both) return blocked.count({to, from}) + blocked.count({from, to}) > 0;
    // A relayed link needs both ends' dials of the relay through.
    if (topology.link_dial(i) == LinkDial::relay)
      return blocked.count({from, topology.relay_of(i)}) + blocked.count({to, topology.relay_of(i)}) > 0;
    return topology.receiver_dials_link(i) ? blocked.count({to, from}) > 0 : blocked.count({from, to}) > 0;
  };
  for (size_t i = 0; i < n; ++i) {
    PeerId self = ring[i], next = ring[(i + 1) % n], prev = ring[(i + n - 1) % n];
    PeerId blamed = link_blocked(i) ? next : link_blocked((i + n - 1) % n) ? prev : 0;
    f.answer(static_cast<ConnId>(self), proposals[0].second.epoch, blamed);  // conn n joined as peer n
  }
  f.step();
  return ring;
}

// Who dials the link from -> to of the last proposal (Topology::receiver_dials); 0: no such link.
inline PeerId dialer_of(const Fixture& f, PeerId from, PeerId to) {
  auto proposals = f.sent<Topology>();
  if (proposals.empty()) return 0;
  const Topology& t = proposals[0].second;
  for (size_t i = 0; i < t.ring.size(); ++i)
    if (t.ring[i].peer_id == from && t.ring[(i + 1) % t.ring.size()].peer_id == to)
      return t.receiver_dials_link(i) ? to : from;
  return 0;
}

inline bool uses(const std::vector<PeerId>& ring, PeerId from, PeerId to) {
  for (size_t i = 0; i < ring.size(); ++i)
    if (ring[i] == from && ring[(i + 1) % ring.size()] == to) return true;
  return false;
}

// While it lives, ferry's log goes (at `level`) to lines() instead of stderr.
struct LogCapture {
  std::ostringstream out;
  std::vector<spdlog::sink_ptr> saved = ferry::log().sinks();

  explicit LogCapture(const char* level) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
    sink->set_pattern("%l %v");
    ferry::log().sinks() = {sink};
    ferry::set_log_level(level);
  }
  ~LogCapture() {
    ferry::log().sinks() = saved;
    ferry::set_log_level("off");
  }
  // The lines logged so far that hold `part`.
  std::vector<std::string> lines(const std::string& part) const {
    std::vector<std::string> found;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);)
      if (line.find(part) != std::string::npos) found.push_back(line);
    return found;
  }
};

}  // namespace ferry::master::testing
