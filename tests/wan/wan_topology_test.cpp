// A network with geography: each pair has its own delay and loss, a pair's cap and a host's
// downlink limit only what they should, and a blocked direction refuses connections one way
// only.
// Needs root; reported as skipped otherwise. The delay checks allow a few ms above the file
// (scheduling on a loaded machine) and nothing below it; the rate checks are lower bounds on
// transfer time, plus one ratio that an uncapped pair must clearly beat.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "topology.h"
#include "wan_network.h"
#include "wan_sockets.h"

using namespace ferry::wan;
using namespace ferry::wan::test;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// The smallest of a connect (SYN, SYN-ACK) and five one-byte ping-pongs: one RTT each.
double measured_rtt_ms(const WanNetwork& net, int from, int to, uint16_t port) {
  const Host& a = net.hosts()[from];
  const Host& b = net.hosts()[to];
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  Fd listener = listen_on(b, port);
  auto echo = echo_bytes(listener, 5, deadline);
  const auto t_connect = Clock::now();
  Fd client = connect_from(a, b, port, 5000);
  REQUIRE(client.fd >= 0);
  double best = ms_since(t_connect);
  for (int i = 0; i < 5; ++i) {
    uint8_t byte = static_cast<uint8_t>(i);
    const auto t0 = Clock::now();
    REQUIRE(send_all(client.fd, &byte, 1, deadline));
    REQUIRE(recv_all(client.fd, &byte, 1, deadline));
    best = std::min(best, ms_since(t0));
  }
  CHECK(echo.get());
  return best;
}

// Milliseconds to move `bytes` from host `from` to host `to` and hear back that all arrived.
double transfer_ms(const WanNetwork& net, int from, int to, uint16_t port, size_t bytes) {
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  Fd listener = listen_on(net.hosts()[to], port);
  auto sink = std::async(std::launch::async, [&] {
    Fd s = accept_one(listener, 5000);
    std::vector<uint8_t> got(bytes);
    const uint8_t done = 1;
    return s.fd >= 0 && recv_all(s.fd, got.data(), got.size(), deadline) && send_all(s.fd, &done, 1, deadline);
  });
  Fd client = connect_from(net.hosts()[from], net.hosts()[to], port, 5000);
  REQUIRE(client.fd >= 0);
  const std::vector<uint8_t> data = pattern(bytes, 1);
  const auto t0 = Clock::now();
  REQUIRE(send_all(client.fd, data.data(), data.size(), deadline));
  uint8_t done = 0;
  REQUIRE(recv_all(client.fd, &done, 1, deadline));
  const double ms = ms_since(t0);
  CHECK(sink.get());
  return ms;
}

}  // namespace

TEST_CASE("each pair of hosts has the round trip its topology gives it", "[wan][root][topology]") {
  if (skip_unless_root()) return;
  const Topology t = Topology::parse_json(R"({
      "defaults": {"rtt": "10ms", "uplink": "200mbit"},
      "hosts": [{"name": "a", "region": "r"}, {"name": "b", "region": "r"}, {"name": "c", "region": "s"}],
      "regions": [{"between": ["r", "s"], "rtt": "40ms"}],
      "links": [{"from": "b", "to": "c", "delay": "60ms"}]})",
                                          "per-pair delays");
  WanNetwork net = WanNetwork::start(t);
  struct Pair {
    int from, to;
    double rtt_ms;
  };
  uint16_t port = 5101;
  // b -> c is 60 ms one way and c -> b 20 ms: an asymmetric pair's RTT is their sum.
  for (const Pair& p : {Pair{0, 1, 10}, Pair{0, 2, 40}, Pair{1, 2, 80}, Pair{2, 0, 40}}) {
    const double rtt = measured_rtt_ms(net, p.from, p.to, port++);
    INFO(net.hosts()[p.from].name << " -> " << net.hosts()[p.to].name << ": " << rtt << " ms");
    CHECK(rtt >= p.rtt_ms);
    CHECK(rtt <= p.rtt_ms + 5.0);
  }
}

TEST_CASE("a pair's cap and a host's downlink slow only their own traffic", "[wan][root][topology]") {
  if (skip_unless_root()) return;
  const Topology t = Topology::parse_json(R"({
      "defaults": {"rtt": "4ms", "uplink": "200mbit"},
      "hosts": [{"name": "a", "region": "r"}, {"name": "b", "region": "r"}, {"name": "c", "region": "r"},
                {"name": "d", "region": "r", "downlink": "10mbit"}],
      "links": [{"between": ["a", "c"], "rate": "10mbit"}]})",
                                          "per-pair caps");
  WanNetwork net = WanNetwork::start(t);
  constexpr size_t kBytes = 1 << 20;
  // At 10 Mbit/s 1 MiB takes 0.84 s, less what the 64 KiB bucket lets through at once.
  const double floor_ms = static_cast<double>(kBytes - 64 * 1024) * 8.0 / 10e6 * 1e3;
  const double capped = transfer_ms(net, 0, 2, 5201, kBytes);
  const double free_pair = transfer_ms(net, 0, 1, 5202, kBytes);
  const double downlink = transfer_ms(net, 1, 3, 5203, kBytes);
  INFO("a -> c (capped) " << capped << " ms, a -> b " << free_pair << " ms, b -> d (downlink) " << downlink << " ms");
  CHECK(capped >= floor_ms);
  CHECK(downlink >= floor_ms);
  CHECK(free_pair < capped / 3);
  const WanStats s = net.stats();
  CHECK(s.drop_full == 0);
}

TEST_CASE("a blocked direction refuses connections one way only", "[wan][root][topology]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(Topology::load(std::string(FERRY_WAN_TOPOLOGY_DIR) + "/firewalled.json"));
  const Topology& t = net.topology();
  const Host& cloud_a = net.hosts()[t.host_index("cloud-a")];
  const Host& office_b = net.hosts()[t.host_index("office-b")];
  const Host& cloud_b = net.hosts()[t.host_index("cloud-b")];

  Fd at_office = listen_on(office_b, 5301);
  // The SYN is dropped (its retransmission would come after 1 s).
  CHECK(connect_from(cloud_a, office_b, 5301, 700).fd < 0);
  CHECK(net.stats().drop_blocked >= 1);
  // Other sources reach office-b.
  CHECK(connect_from(cloud_b, office_b, 5301, 3000).fd >= 0);

  // The other way works, and the connection it opens carries data both ways.
  auto [client, server] = dial_and_accept(office_b, cloud_a, 5302);
  check_both_ways(server, client);  // cloud-a -> office-b first
}

TEST_CASE("hosts have the address families their topology gives them, and only those", "[wan][root][topology]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(Topology::load(std::string(FERRY_WAN_TOPOLOGY_DIR) + "/mixed-families.json"));
  const Topology& t = net.topology();
  const Host& dual_a = net.hosts()[t.host_index("dual-a")];
  const Host& v4 = net.hosts()[t.host_index("v4-only")];
  const Host& v6 = net.hosts()[t.host_index("v6-only")];
  const Host& dual_b = net.hosts()[t.host_index("dual-b")];
  CHECK(dual_a.ip4 == "10.77.0.1");
  CHECK(dual_a.ip6 == "fd77::1");
  CHECK(dual_a.ip == dual_a.ip4);
  CHECK(v4.ip6.empty());
  CHECK(v6.ip4.empty());
  CHECK(v6.ip == "fd77::3");

  // IPv6 through the forwarder, with its delay: data both ways.
  Fd at_b6 = listen_on(dual_b, 5501, dual_b.ip6);
  const auto start = Clock::now();
  Fd client = connect_from(dual_a, dual_b, 5501, 3000, dual_b.ip6);
  REQUIRE(client.fd >= 0);
  CHECK(Clock::now() - start >= std::chrono::milliseconds(19));  // one RTT of the topology's 20 ms
  Fd server = accept_one(at_b6, 3000);
  REQUIRE(server.fd >= 0);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  const std::vector<uint8_t> sent = pattern(256 << 10, 3);
  std::vector<uint8_t> got(sent.size());
  auto receiving = std::async(std::launch::async, [&] { return recv_all(server.fd, got.data(), got.size(), deadline); });
  REQUIRE(send_all(client.fd, sent.data(), sent.size(), deadline));
  REQUIRE(receiving.get());
  CHECK(got == sent);

  // A host without a family has no route in it, either way.
  Fd at_v6 = listen_on(v6, 5502);
  CHECK(connect_from(v4, v6, 5502, 700, "fd77::3").fd < 0);
  Fd at_v4 = listen_on(v4, 5503);
  CHECK(connect_from(v6, v4, 5503, 700, "10.77.0.2").fd < 0);
  // Each reaches a dual-stack host in its own family.
  Fd at_a4 = listen_on(dual_a, 5504, dual_a.ip4);
  Fd at_a6 = listen_on(dual_a, 5505, dual_a.ip6);
  CHECK(connect_from(v4, dual_a, 5504, 3000, dual_a.ip4).fd >= 0);
  CHECK(connect_from(v6, dual_a, 5505, 3000, dual_a.ip6).fd >= 0);
}

TEST_CASE("a pair's loss is its own and changes live", "[wan][root][topology]") {
  if (skip_unless_root()) return;
  const Topology t = Topology::parse_json(R"({
      "defaults": {"rtt": "4ms"},
      "hosts": [{"name": "a", "region": "r"}, {"name": "b", "region": "r"}, {"name": "c", "region": "r"}],
      "links": [{"from": "a", "to": "b", "loss": "100%"}]})",
                                          "per-pair loss");
  WanNetwork net = WanNetwork::start(t);
  const Host& a = net.hosts()[0];
  const Host& b = net.hosts()[1];
  const Host& c = net.hosts()[2];
  Fd at_b = listen_on(b, 5401);
  Fd at_c = listen_on(c, 5402);
  CHECK(connect_from(a, b, 5401, 700).fd < 0);  // every SYN lost
  CHECK(connect_from(a, c, 5402, 3000).fd >= 0);
  net.set_link_loss(0, 1, 0.0);
  net.set_link_loss(0, 2, 1.0);
  CHECK(connect_from(a, b, 5401, 3000).fd >= 0);
  CHECK(connect_from(a, c, 5402, 700).fd < 0);
  CHECK(net.stats().drop_loss >= 2);
  CHECK_THROWS_AS(net.set_link_loss(1, 1, 0.5), std::out_of_range);
}
