// A MasterState fed message by message, as the master's unit tests drive it:
// joins, proposals answered, collectives begun; the effects of each step kept.
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/log.h"
#include "master/master_state.h"

namespace ferry::master::testing {

using namespace ferry::wire;

struct Fixture {
  MasterState state;
  Effects last;

  explicit Fixture(std::optional<RunSecret> secret = std::nullopt) : state({}, std::move(secret)) {
    ferry::set_log_level("off");
  }
  explicit Fixture(MasterLimits limits) : state(limits) { ferry::set_log_level("off"); }

  static std::string nonce(ConnId conn) { return std::string(32, static_cast<char>('a' + conn)); }

  // What joiners say in their hello: when they answer a proposal at the latest.
  uint32_t silent_link_ms = 15'000;

  // Answers every probe round (with nothing measured) unless a test probes by hand.
  bool answer_probes = true;

  Effects& step() {
    last = state.take_effects();
    for (bool probing = answer_probes; probing;) {
      probing = false;
      std::vector<std::pair<ConnId, ProbeRound>> rounds;
      for (auto& s : last.sends)
        if (auto* r = std::get_if<ProbeRound>(&s.message); r && !answered_rounds.count({s.conn, r->epoch, r->round}))
          rounds.push_back({s.conn, *r});
      for (auto& [conn, r] : rounds) {
        answered_rounds.insert({conn, r.epoch, r.round});
        state.on_message(conn, ProbeDone{r.epoch, r.round, {}, {}});
      }
      Effects more = state.take_effects();
      probing = !rounds.empty();
      last.sends.insert(last.sends.end(), more.sends.begin(), more.sends.end());
      last.closes.insert(last.closes.end(), more.closes.begin(), more.closes.end());
      last.deadlines.insert(last.deadlines.end(), more.deadlines.begin(), more.deadlines.end());
      last.reachability_checks.insert(last.reachability_checks.end(), more.reachability_checks.begin(),
                                      more.reachability_checks.end());
    }
    return last;
  }
  std::set<std::tuple<ConnId, uint64_t, uint32_t>> answered_rounds;

  // Connects `conn` from `host` (default 10.0.0.<conn>) and says hello for a
  // peer of `group` listening also at `other_hosts`; returns its peer id, or 0
  // when the master refused it.
  PeerId hello(ConnId conn, uint32_t group = 0, std::string host = "", std::vector<std::string> other_hosts = {}) {
    Hello h = hello_of(conn, group);
    h.other_hosts = std::move(other_hosts);
    return say(conn, h, host);
  }
  Hello hello_of(ConnId conn, uint32_t group = 0) const {
    Hello h;
    h.peer_group = group;
    h.advertised_port = static_cast<uint16_t>(5000 + conn);
    h.p2p_connections = 2;
    h.heartbeat_timeout_ms = 5000;
    h.silent_link_ms = silent_link_ms;
    return h;
  }
  // Connects `conn` and says `h`; returns the id welcomed, or 0.
  PeerId say(ConnId conn, const Hello& h, std::string host = "") {
    state.on_connected(conn, host.empty() ? "10.0.0." + std::to_string(conn) : host, nonce(conn));
    state.on_message(conn, h);
    for (auto& s : step().sends)
      if (auto* w = std::get_if<Welcome>(&s.message); w && s.conn == conn) return w->peer_id;
    return 0;
  }
  PeerId join(ConnId conn, uint32_t group = 0, std::string host = "") {
    PeerId id = hello(conn, group, std::move(host));
    if (id == 0) FAIL("no welcome");
    return id;
  }

  // The kick that closed `conn` in the last step; none: an empty one.
  Kick kick_of(ConnId conn) const {
    for (auto& c : last.closes)
      if (c.conn == conn && c.last) return std::get<Kick>(*c.last);
    return {};
  }

  // Conn `conn` answers the last proposal it got: ready, or failed blaming `blamed`.
  void answer(ConnId conn, uint64_t epoch, PeerId blamed = 0) {
    uint32_t code = blamed ? static_cast<uint32_t>(Errc::timeout) : 0;
    state.on_message(conn, TopologyReady{epoch, code, blamed, blamed ? "links not up" : ""});
  }

  template <class M>
  std::vector<std::pair<ConnId, M>> sent() const {
    std::vector<std::pair<ConnId, M>> out;
    for (auto& s : last.sends)
      if (auto* m = std::get_if<M>(&s.message)) out.push_back({s.conn, *m});
    return out;
  }

  bool closed(ConnId conn) const {
    for (auto& c : last.closes)
      if (c.conn == conn) return true;
    return false;
  }

  // The clock passes the deadline a blamed joiner has to answer by (master_state.h).
  void pass_answer_grace() {
    now_ms += silent_link_ms + 1000;
    state.on_tick(now_ms);
    step();
  }
  uint64_t now_ms = 0;

  // Every member of the last proposal reports ready; returns the committed epoch.
  uint64_t all_ready() {
    auto proposals = sent<Topology>();
    REQUIRE_FALSE(proposals.empty());
    uint64_t epoch = proposals.front().second.epoch;
    for (auto& [conn, t] : proposals) state.on_message(conn, TopologyReady{epoch, 0, 0, ""});
    step();
    REQUIRE(sent<TopologyDone>().size() == proposals.size());
    return epoch;
  }

  // A ring of conns 1 and 2 votes conn 3 in; returns its id and the proposal's epoch (not yet ready).
  std::pair<PeerId, uint64_t> ring_of_two_proposing_a_third() {
    ring_of(2);
    PeerId newcomer = join(3);
    state.on_message(1, TopologyVote{});
    state.on_message(2, TopologyVote{});
    step();
    return {newcomer, sent<Topology>()[0].second.epoch};
  }

  // A ring of conn 1 votes conns 2 and 3 in and every link comes up; the
  // probes are answered by hand from here on. Returns the proposal's epoch
  // (its first probe round is in the last step).
  uint64_t three_probing() {
    answer_probes = false;
    join(1);
    all_ready();  // a ring of one probes nothing
    join(2);
    join(3);
    state.on_message(1, TopologyVote{});
    step();
    auto proposals = sent<Topology>();
    REQUIRE(proposals.size() == 3);
    uint64_t epoch = proposals[0].second.epoch;
    for (ConnId c = 1; c <= 3; ++c) state.on_message(c, TopologyReady{epoch, 0, 0, ""});
    step();
    return epoch;
  }

  // Conns 1..n begin collective `seq` alike (and so get the go).
  void all_begin(uint64_t epoch, uint32_t seq, ConnId n) {
    for (ConnId c = 1; c <= n; ++c) state.on_message(c, CollectiveBegin{epoch, seq, 1, 0, 10, 10, 0});
    step();
  }

  // Every one of `n` members got the same verdict `code`.
  void expect_verdicts(size_t n, Errc code) const {
    auto results = sent<CollectiveResult>();
    REQUIRE(results.size() == n);
    for (auto& [conn, r] : results) CHECK(r.code == static_cast<uint32_t>(code));
  }

  // Forms a committed ring of conns 1..n in group 0.
  void ring_of(ConnId n) {
    join(1);
    all_ready();
    for (ConnId c = 2; c <= n; ++c) join(c);
    for (PeerId id : state.ring(0)) (void)id;
    for (ConnId c = 1; c <= static_cast<ConnId>(state.ring(0).size()); ++c) state.on_message(c, TopologyVote{});
    step();
    all_ready();
    REQUIRE(state.ring(0).size() == n);
  }
};

inline CollectiveBegin begin(uint64_t epoch, uint32_t seq, uint64_t count = 10, uint64_t tag = 0) {
  return CollectiveBegin{epoch, seq, 1, tag, count, 10, 0};
}

}  // namespace ferry::master::testing
