// The master's rules for joining: the first peer admitted at once, addresses, the run secret,
// peer groups, caps and back-off per source, protocol violations, groups forgotten (master_admission.cpp).
#include <catch2/catch.hpp>

#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "master_state_fixture.h"
#include "wire/frame.h"

using namespace ferry;
using namespace ferry::master;
using namespace ferry::wire;

using namespace ferry::master::testing;

TEST_CASE("master: the first peer of a group is admitted at once, the next waits for a vote", "[master]") {
  Fixture f;
  f.join(1);
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 1);
  CHECK(proposals[0].second.ring.size() == 1);
  CHECK(proposals[0].second.ring[0].host == "10.0.0.1");  // no advertised host: what the master saw
  f.all_ready();
  CHECK(f.state.ring(0).size() == 1);

  f.join(2);
  CHECK(f.sent<Topology>().empty());  // peer 2 waits: group 0 has an accepted member
  CHECK(f.state.pending(0).size() == 1);
  f.state.on_message(1, TopologyVote{});
  f.step();
  auto second = f.sent<Topology>();
  REQUIRE(second.size() == 2);
  CHECK(second[0].second.ring.size() == 2);
  CHECK(second[0].second.p2p_connections == 2);
  uint64_t epoch = f.all_ready();
  CHECK(f.state.epoch(0) == epoch);
  CHECK(f.state.pending(0).empty());
  auto done = f.sent<TopologyDone>();
  CHECK(done[0].second.global_world == 2);
  CHECK(done[0].second.num_groups == 1);
}

TEST_CASE("master: a peer is offered at the address it was seen at, then at its addresses of the other family",
          "[master][address]") {
  Fixture f;
  // Seen over IPv4; it also listens at two IPv6 addresses, one IPv4 one, and sends a name.
  f.hello(1, 0, "192.0.2.1", {"192.0.2.1", "2001:db8::1", "10.1.1.1", "fd00::1", "evil.example"});
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 1);
  const RingMember& seen_v4 = proposals[0].second.ring[0];
  CHECK(seen_v4.host == "192.0.2.1");
  CHECK(seen_v4.other_hosts == std::vector<std::string>{"2001:db8::1", "fd00::1"});
  f.all_ready();

  // Seen over IPv6: its IPv4 address is the other one.
  f.hello(2, 0, "2001:db8::2", {"192.0.2.2", "2001:db8::2"});
  f.state.on_message(1, TopologyVote{});
  f.step();
  auto second = f.sent<Topology>();
  REQUIRE(second.size() == 2);
  REQUIRE(second[0].second.ring.size() == 2);
  CHECK(second[0].second.ring[0] == seen_v4);
  CHECK(second[0].second.ring[1].host == "2001:db8::2");
  CHECK(second[0].second.ring[1].other_hosts == std::vector<std::string>{"192.0.2.2"});
}

// Found by fuzz_master_state: a peer's reason of the longest legal length,
// quoted in the master's kick, made a kick no peer could decode.
TEST_CASE("master: reasons that quote a peer's longest reason still decode at the peers", "[master][fuzz]") {
  auto decodes = [](const Message& m) {
    auto frame = encode_message(m);
    std::vector<uint8_t> payload(frame.begin() + kFrameHeaderBytes, frame.end());
    return decode_message(static_cast<uint16_t>(message_type(m)), payload).status.ok();
  };
  const std::string longest(kMaxReasonLength, 'r');
  Fixture f;
  auto [newcomer, epoch] = f.ring_of_two_proposing_a_third();
  f.state.on_message(2, TopologyReady{epoch, static_cast<uint32_t>(Errc::connect), newcomer, longest});
  f.answer(1, epoch);
  f.step();
  f.pass_answer_grace();
  REQUIRE(f.closed(3));
  for (auto& c : f.last.closes) {
    REQUIRE(c.last);
    CHECK(decodes(*c.last));
  }
  f.all_ready();
  uint64_t e = f.state.epoch(0);
  f.state.on_message(1, begin(e, 0));
  f.state.on_message(2, begin(e, 0));
  f.step();
  f.state.on_message(1, CollectiveEnd{e, 0, static_cast<uint32_t>(Errc::timeout), longest});
  f.state.on_message(2, CollectiveEnd{e, 0, 0, ""});
  f.step();
  auto results = f.sent<CollectiveResult>();
  REQUIRE(results.size() == 2);
  for (auto& [conn, r] : results) CHECK(decodes(r));
  // A cut keeps UTF-8 whole.
  std::string accents;
  while (accents.size() < 2 * kMaxReasonLength) accents += "\xc3\xa9";
  std::string cut = bounded_reason(accents);
  CHECK(cut.size() <= kMaxReasonLength);
  CHECK(cut.substr(cut.size() - 3) == "...");
  CHECK((cut.size() - 3) % 2 == 0);
}

TEST_CASE("master: protocol violations get the sender kicked, with a reason", "[master]") {
  Fixture f;
  f.state.on_connected(1, "h", Fixture::nonce(1));
  f.state.on_message(1, CollectiveGo{});
  f.step();
  REQUIRE(f.closed(1));
  REQUIRE(f.last.closes[0].last.has_value());
  CHECK(std::get<Kick>(*f.last.closes[0].last).reason.find("expected hello") != std::string::npos);

  f.ring_of(2);
  f.state.on_message(2, Hello{});
  f.step();
  CHECK(f.closed(2));  // a second hello
  PeerId pending = f.join(4);
  (void)pending;
  f.state.on_message(4, TopologyVote{});
  f.step();
  CHECK(f.closed(4));  // votes are for accepted peers only
  CHECK(f.state.connection_count() == 1);
}

TEST_CASE("master: with a run secret, only a valid proof joins, and the master proves back", "[master][auth]") {
  auto secret = RunSecret::from_bytes("0123456789abcdef-secret");
  Fixture f(secret);
  f.state.on_connected(1, "h", Fixture::nonce(1));
  f.step();
  REQUIRE(f.sent<AuthChallenge>().size() == 1);
  CHECK(f.sent<AuthChallenge>()[0].second.required == 1);
  CHECK(f.sent<AuthChallenge>()[0].second.nonce == Fixture::nonce(1));

  std::string peer_nonce(32, 'z');
  Hello good{0, "", 5001, 2, 5000, peer_nonce,
             secret.proof("ferry/1/peer-to-master", Fixture::nonce(1), peer_nonce), 0, {}, 0, 0, {}, 0, {}, {}};
  f.state.on_message(1, good);
  f.step();
  REQUIRE(f.sent<Welcome>().size() == 1);
  CHECK(secret.verify(f.sent<Welcome>()[0].second.proof, "ferry/1/master-to-peer", peer_nonce, Fixture::nonce(1)));

  for (std::string bad_proof : {std::string(), std::string(32, '0'),
                                secret.proof("ferry/1/peer-to-master", Fixture::nonce(9), peer_nonce),  // replayed
                                RunSecret::from_bytes("another secret, 16+ bytes")
                                    .proof("ferry/1/peer-to-master", Fixture::nonce(2), peer_nonce)}) {
    f.state.on_connected(2, "h", Fixture::nonce(2));
    f.step();
    f.state.on_message(2, Hello{0, "", 5002, 2, 5000, peer_nonce, bad_proof, 0, {}, 0, 0, {}, 0, {}, {}});
    f.step();
    REQUIRE(f.closed(2));
    CHECK(std::get<Kick>(*f.last.closes[0].last).code == static_cast<uint32_t>(Errc::auth));
    CHECK(f.sent<Welcome>().empty());
  }
  CHECK(f.state.peer_count() == 1);
}

TEST_CASE("master: peer groups are separate rings with separate epochs", "[master][groups]") {
  Fixture f;
  f.join(1, 5);
  f.all_ready();
  f.join(2, 6);
  f.all_ready();  // an empty group admits its first peer at once, whatever other groups do
  CHECK(f.state.ring(5).size() == 1);
  CHECK(f.state.ring(6).size() == 1);
  CHECK(f.state.epoch(5) != f.state.epoch(6));
  auto done = f.sent<TopologyDone>();
  CHECK(done[0].second.num_groups == 2);
  CHECK(done[0].second.global_world == 2);
}

TEST_CASE("master: joiners are capped per source address and per group", "[master][insiders]") {
  MasterLimits limits;
  limits.max_pending_per_source = 2;
  limits.max_pending_per_group = 3;
  Fixture f(limits);
  f.join(1);
  f.all_ready();
  CHECK(f.hello(2, 0, "10.9.9.9") != 0);
  CHECK(f.hello(3, 0, "10.9.9.9") != 0);
  CHECK(f.hello(4, 0, "10.9.9.9") == 0);
  CHECK(f.kick_of(4).code == static_cast<uint32_t>(Errc::kicked));
  CHECK(f.kick_of(4).reason.find("already wait for admission") != std::string::npos);
  CHECK(f.hello(5, 0, "10.8.8.8") != 0);  // another address still may
  CHECK(f.hello(6, 0, "10.7.7.7") == 0);  // but the group is full
  CHECK(f.kick_of(6).reason.find("peer group 0 already has 3 joiners waiting") != std::string::npos);
  CHECK(f.hello(7, 1, "10.7.7.7") != 0);  // other groups are not
  // Admitted joiners no longer count.
  f.state.on_message(1, TopologyVote{});
  f.step();
  f.all_ready();
  CHECK(f.hello(8, 0, "10.9.9.9") != 0);
}

TEST_CASE("master: a source whose joiner's links failed is refused, doubling, until its back-off ends",
          "[master][insiders]") {
  Fixture f;
  f.silent_link_ms = 0;  // a fake that says nothing of its deadline is not waited for once blamed
  f.state.advance_clock(1'000'000);
  f.ring_of(2);
  ConnId next_conn = 10;
  // Evicts a joiner from 10.6.6.6, as a fake whose port never answers.
  auto evict_fake = [&] {
    ConnId conn = next_conn++;
    REQUIRE(f.hello(conn, 0, "10.6.6.6") != 0);
    uint64_t epoch = vote_in(f, 2);
    f.answer(2, epoch, f.state.pending(0).at(0));
    f.answer(1, epoch);
    f.step();
    REQUIRE(f.closed(conn));
    f.all_ready();
  };
  evict_fake();
  CHECK(f.state.backoff_until("10.6.6.6") == 1'030'000);
  CHECK(f.hello(next_conn++, 0, "10.6.6.6") == 0);
  CHECK(f.kick_of(next_conn - 1).reason.find("may join again in 30 s") != std::string::npos);
  CHECK(f.hello(next_conn++, 0, "10.5.5.5") != 0);  // other addresses are unaffected
  f.state.on_disconnected(next_conn - 1, "bye");
  f.state.advance_clock(1'030'000);
  evict_fake();  // the second eviction doubles it
  CHECK(f.hello(next_conn++, 0, "10.6.6.6") == 0);
  f.state.advance_clock(1'089'999);
  CHECK(f.hello(next_conn++, 0, "10.6.6.6") == 0);
  CHECK(f.kick_of(next_conn - 1).reason.find("again in 1 s") != std::string::npos);
  f.state.advance_clock(1'090'000);
  CHECK(f.state.backoff_until("10.6.6.6") == 0);
  // After an hour without an eviction the address starts over at 30 s.
  f.state.advance_clock(1'090'000 + 3'600'000);
  evict_fake();
  CHECK(f.state.backoff_until("10.6.6.6") == 1'090'000 + 3'600'000 + 30'000);
}

TEST_CASE("master: a group with nobody left is forgotten", "[master][insiders]") {
  Fixture f;
  f.join(1, 5);
  f.all_ready();
  f.join(2, 5);
  f.join(3, 6);
  CHECK(f.state.group_count() == 2);
  f.state.on_disconnected(3, "gone");  // its group never had a ring
  f.state.on_message(1, Leave{});
  CHECK(f.state.group_count() == 1);   // group 5 still has its joiner, proposed alone now
  f.state.on_disconnected(2, "gone");
  f.step();
  CHECK(f.state.group_count() == 0);
}

TEST_CASE("master: a newcomer is offered to its group once the master's dial to its listener answers, "
          "and one that never answers is dial-out-only from its first ring",
          "[master]") {
  MasterLimits limits;
  limits.reachability_check_ms = 2000;
  Fixture f(limits);
  auto check_of = [&](PeerId id) {
    for (auto& c : f.last.reachability_checks)
      if (c.peer == id) return std::optional<Effects::CheckReachability>(c);
    return std::optional<Effects::CheckReachability>();
  };

  SECTION("the first peer waits for the answer, then forms its ring") {
    PeerId first = f.join(1);
    auto check = check_of(first);
    REQUIRE(check);
    CHECK(check->host == "10.0.0.1");
    CHECK(check->port == 5001);
    CHECK(check->timeout_ms == 2000);
    CHECK(f.sent<Topology>().empty());
    CHECK(f.state.pending(0).empty());
    f.state.on_reachability(first, true);
    f.step();
    CHECK(proposed_ring(f) == std::vector<uint64_t>{first});
    f.state.on_reachability(first, false);  // a second answer is ignored
    f.step();
    CHECK(f.last.sends.empty());
  }
  SECTION("two that do not answer sit between the two that do, and dial every link with them") {
    PeerId open_a = f.join(1);
    f.state.on_reachability(open_a, true);
    f.step();
    f.all_ready();
    PeerId open_b = f.join(2), closed_a = f.join(3), closed_b = f.join(4);
    f.state.on_reachability(closed_a, false);
    f.state.on_reachability(closed_b, false);
    f.state.on_reachability(open_b, true);
    f.step();
    CHECK(f.state.pending(0).size() == 3);
    f.state.on_message(1, TopologyVote{});
    f.step();
    const auto ring = proposed_ring(f);
    REQUIRE(ring.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      const PeerId from = ring[i], to = ring[(i + 1) % 4];
      CHECK_FALSE((from >= closed_a && to >= closed_a));  // the two closed ones are never neighbours
      if (to == closed_a || to == closed_b) CHECK(dialer_of(f, from, to) == to);
    }
  }
  SECTION("one that leaves while it is checked is not offered when the answer comes") {
    PeerId first = f.join(1);
    f.state.on_disconnected(1, "gone");
    f.step();
    f.state.on_reachability(first, true);
    f.step();
    CHECK(f.sent<Topology>().empty());
    CHECK(f.state.pending(0).empty());
  }
  SECTION("a dial-out-only hello is not checked") {
    Hello h = f.hello_of(1);
    h.advertised_port = 0;
    h.dial_out_only = 1;
    PeerId id = f.say(1, h);
    REQUIRE(id != 0);
    CHECK_FALSE(check_of(id));
    CHECK(proposed_ring(f) == std::vector<uint64_t>{id});
  }
}

TEST_CASE("master: without reachability_check_ms (a bare MasterState) a newcomer is offered at once, unchecked",
          "[master]") {
  Fixture f;
  PeerId first = f.join(1);
  CHECK(f.last.reachability_checks.empty());
  CHECK(proposed_ring(f) == std::vector<uint64_t>{first});
}
