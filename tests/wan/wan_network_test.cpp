// Emulated-WAN behaviour: data arrives intact, never faster than the RTT, loss and isolation
// block it, and stop() leaves nothing behind. Needs root; reported as skipped otherwise.
// Lower bounds only: correctness tests never assert a timing benchmark.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
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

using namespace ferry::wan;
using Clock = std::chrono::steady_clock;

namespace {

// A test that cannot run here says so with this marker, and returns: ctest
// reports it as skipped (SKIP_REGULAR_EXPRESSION in CMakeLists.txt), not passed.
void report_skipped(const char* why) { WARN("FERRY_TEST_SKIPPED: " << why); }

bool skip_unless_root() {
  if (::geteuid() == 0) return false;
  report_skipped("not root: emulated-WAN network tests need network namespaces");
  return true;
}

// Owns a socket fd.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

sockaddr_in address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

Fd listen_on(const Host& host, uint16_t port) {
  ScopedNetns in(host.netns);
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(s.fd >= 0);
  const int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in a = address(host.ip, port);
  REQUIRE(::bind(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(s.fd, 8) == 0);
  return s;
}

// Connects from `from` to `to`:port; an invalid Fd when not connected within timeout_ms.
Fd connect_from(const Host& from, const Host& to, uint16_t port, int timeout_ms) {
  Fd s;
  {
    ScopedNetns in(from.netns);
    s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  REQUIRE(s.fd >= 0);
  const sockaddr_in a = address(to.ip, port);
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    REQUIRE(errno == EINPROGRESS);
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return Fd();
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Fd();
  }
  const int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

Fd accept_one(const Fd& listener, int timeout_ms) {
  pollfd p{listener.fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return Fd();
  Fd s(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
  const int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

// Blocking-style full transfer on a possibly non-blocking socket, with a deadline.
bool send_all(int fd, const uint8_t* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) return false;
    pollfd p{fd, POLLOUT, 0};
    if (Clock::now() > deadline || ::poll(&p, 1, 100) < 0) return false;
  }
  return true;
}

bool recv_all(int fd, uint8_t* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r > 0) {
      data += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR)) return false;
    pollfd p{fd, POLLIN, 0};
    if (Clock::now() > deadline || ::poll(&p, 1, 100) < 0) return false;
  }
  return true;
}

std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed;
  for (auto& b : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(x >> 56);
  }
  return v;
}

}  // namespace

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
    auto echo = std::async(std::launch::async, [&] {
      Fd s = accept_one(listener, 5000);
      uint8_t b = 0;
      for (int i = 0; i < 5; ++i)
        if (s.fd < 0 || !recv_all(s.fd, &b, 1, deadline) || !send_all(s.fd, &b, 1, deadline)) return false;
      return true;
    });
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
