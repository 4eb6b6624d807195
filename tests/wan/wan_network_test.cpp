// Emulated-WAN behaviour: data arrives intact, never faster than the RTT, loss and isolation
// block it, and stop() leaves nothing behind. Needs root; reported as skipped otherwise.
// Lower bounds only: correctness tests never assert a timing benchmark.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "netns.h"
#include "wan_network.h"
#include "wan_sockets.h"

using namespace ferry::wan;
using namespace ferry::wan::test;

TEST_CASE("network carries TCP intact and no faster than the RTT and leaves nothing after stop", "[wan][root]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(WanConfig::parse("hosts=3,rtt=40ms,loss=0,rate=200mbit,cc=cubic"));
  REQUIRE(net.hosts().size() == 3);
  CHECK(net.hosts()[2].ip == "10.77.0.3");
  CHECK(net.exec_prefix(1) == std::vector<std::string>{"ip", "netns", "exec", net.hosts()[1].netns});
  for (const Host& h : net.hosts()) CHECK(netns_exists(h.netns));

  // The congestion control rides on the route.
  const std::string routes = run_checked({"ip", "-n", net.hosts()[0].netns, "route", "show"});
  CHECK_THAT(routes, Catch::Contains("10.77.0.0/24") && Catch::Contains("congctl cubic"));

  const Host& a = net.hosts()[0];
  const Host& c = net.hosts()[2];
  const auto deadline = Clock::now() + std::chrono::seconds(10);

  SECTION("2 MiB from host 0 to host 2 arrive byte for byte") {
    Fd listener = listen_on(c, 5001);
    const std::vector<uint8_t> sent = pattern(2 << 20, 42);
    auto server = std::async(std::launch::async, [&] {
      Fd s = accept_one(listener, 5000);
      std::vector<uint8_t> got(sent.size());
      if (s.fd < 0 || !recv_all(s.fd, got.data(), got.size(), deadline)) return false;
      const uint8_t verdict = got == sent ? 'y' : 'n';
      return send_all(s.fd, &verdict, 1, deadline) && verdict == 'y';
    });
    Fd client = connect_from(a, c, 5001, 3000);
    REQUIRE(client.fd >= 0);
    REQUIRE(send_all(client.fd, sent.data(), sent.size(), deadline));
    uint8_t verdict = 0;
    REQUIRE(recv_all(client.fd, &verdict, 1, deadline));
    CHECK(verdict == 'y');
    CHECK(server.get());
    const WanStats s = net.stats();
    CHECK(s.tx_bytes >= sent.size());
    CHECK(s.drop_loss == 0);
    CHECK(s.drop_full == 0);
    CHECK(s.tx_frames < s.tx_packets);  // segmentation offload is in effect (gso=on)
  }

  SECTION("a request/response round trip takes at least the RTT") {
    Fd listener = listen_on(net.hosts()[1], 5002);
    auto echo = echo_bytes(listener, 5, deadline);
    const auto t_connect = Clock::now();
    Fd client = connect_from(a, net.hosts()[1], 5002, 3000);
    REQUIRE(client.fd >= 0);
    const double connect_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_connect).count();
    CHECK(connect_ms >= 40.0);  // SYN out, SYN-ACK back
    for (int i = 0; i < 5; ++i) {
      uint8_t b = static_cast<uint8_t>(i);
      const auto t0 = Clock::now();
      REQUIRE(send_all(client.fd, &b, 1, deadline));
      REQUIRE(recv_all(client.fd, &b, 1, deadline));
      const double rtt_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      CHECK(rtt_ms >= 40.0);
      CHECK(b == i);
    }
    CHECK(echo.get());
  }

  SECTION("stop() removes the namespaces and the forwarder") {
    const pid_t forwarder = net.forwarder_pid();
    CHECK(net.forwarder_running());
    std::vector<std::string> names;
    for (const Host& h : net.hosts()) names.push_back(h.netns);
    net.stop();
    net.stop();  // idempotent
    for (const std::string& n : names) CHECK_FALSE(netns_exists(n));
    CHECK_FALSE(net.forwarder_running());
    CHECK(::kill(forwarder, 0) != 0);
  }
}

TEST_CASE("loss=100% blocks traffic and loss and isolation change live", "[wan][root]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(WanConfig::parse("hosts=2,rtt=10ms,loss=100%,rate=200mbit"));
  const Host& a = net.hosts()[0];
  const Host& b = net.hosts()[1];
  Fd listener = listen_on(b, 5003);

  // The SYN and its first retransmission (after 1 s) are both dropped.
  CHECK(connect_from(a, b, 5003, 1200).fd < 0);
  CHECK(net.stats().drop_loss >= 2);

  net.set_loss(0);
  {
    Fd c = connect_from(a, b, 5003, 3000);
    CHECK(c.fd >= 0);
    Fd s = accept_one(listener, 3000);
    CHECK(s.fd >= 0);
  }

  net.isolate(1, true);
  CHECK(connect_from(a, b, 5003, 300).fd < 0);
  CHECK(net.stats().drop_isolated >= 1);
  net.isolate(1, false);
  CHECK(connect_from(a, b, 5003, 3000).fd >= 0);
}

// Lossy transfers exercise the forwarder's GSO split: what it rebuilds must pass the
// receiver's header and checksum checks, or TCP would limp along on retransmissions alone.
TEST_CASE("lossy network still delivers intact data with no malformed packets", "[wan][root]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(WanConfig::parse("hosts=2,rtt=10ms,loss=2%,rate=200mbit,seed=3"));
  const Host& a = net.hosts()[0];
  const Host& b = net.hosts()[1];
  Fd listener = listen_on(b, 5004);
  const std::vector<uint8_t> sent = pattern(1 << 20, 7);
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  auto server = std::async(std::launch::async, [&] {
    Fd s = accept_one(listener, 10000);
    std::vector<uint8_t> got(sent.size());
    return s.fd >= 0 && recv_all(s.fd, got.data(), got.size(), deadline) && got == sent;
  });
  Fd client = connect_from(a, b, 5004, 10000);  // the SYN may be lost: retried after 1 s
  REQUIRE(client.fd >= 0);
  REQUIRE(send_all(client.fd, sent.data(), sent.size(), deadline));
  CHECK(server.get());

  const WanStats s = net.stats();
  CHECK(s.drop_loss > 0);
  CHECK(s.split_frames > 0);
  CHECK(s.write_errors == 0);
  // The receiver's own counters: nothing the forwarder rebuilt was refused.
  const std::string snmp = run_checked({"ip", "netns", "exec", b.netns, "cat", "/proc/net/snmp"});
  auto counter = [&](const std::string& proto, const std::string& name) -> long {
    const size_t head = snmp.find(proto + ": ");
    const size_t vals = snmp.find(proto + ": ", head + 1);
    if (head == std::string::npos || vals == std::string::npos) return -1;
    std::istringstream names(snmp.substr(head, snmp.find('\n', head) - head));
    std::istringstream values(snmp.substr(vals, snmp.find('\n', vals) - vals));
    std::string n, v;
    while (names >> n && values >> v)
      if (n == name) return std::stol(v);
    return -1;
  };
  CHECK(counter("Ip", "InHdrErrors") == 0);
  CHECK(counter("Tcp", "InErrs") == 0);
  CHECK(counter("Tcp", "InCsumErrors") == 0);
  CHECK(counter("Ip", "InReceives") > 0);
}

TEST_CASE("gso=off moves one wire packet per frame intact", "[wan][root]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(WanConfig::parse("hosts=2,rtt=4ms,loss=0.5%,gso=off"));
  Fd listener = listen_on(net.hosts()[1], 5005);
  const std::vector<uint8_t> sent = pattern(256 << 10, 11);
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  auto server = std::async(std::launch::async, [&] {
    Fd s = accept_one(listener, 8000);
    std::vector<uint8_t> got(sent.size());
    return s.fd >= 0 && recv_all(s.fd, got.data(), got.size(), deadline) && got == sent;
  });
  Fd client = connect_from(net.hosts()[0], net.hosts()[1], 5005, 8000);
  REQUIRE(client.fd >= 0);
  REQUIRE(send_all(client.fd, sent.data(), sent.size(), deadline));
  CHECK(server.get());
  const WanStats s = net.stats();
  CHECK(s.tx_frames == s.tx_packets);
  CHECK(s.split_frames == 0);
}

TEST_CASE("start() without root says what it needs", "[wan]") {
  if (::geteuid() == 0) {
    report_skipped("running as root: the refusal is exercised by unprivileged runs");
    return;
  }
  CHECK_THROWS_WITH(WanNetwork::start(WanConfig{}), Catch::Contains("needs root: network namespaces"));
}
