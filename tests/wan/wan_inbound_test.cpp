// Hosts' inbound policies with plain sockets (no ferry peers): a closed host accepts no
// connection, a stateful one only those it asked for, each dials out freely; and a TCP
// simultaneous open (both ends connect to each other from known ports) passes two stateful
// hosts and fails two closed ones. Needs root; reported as skipped otherwise. Every failure
// asserted here is paired with the drop counter that shows the policy caused it, and with a
// dial that the same code makes succeed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "netns.h"
#include "topology.h"
#include "wan_network.h"
#include "wan_sockets.h"

using namespace ferry::wan;
using namespace ferry::wan::test;

namespace {

std::string shipped(const char* name) { return std::string(FERRY_WAN_TOPOLOGY_DIR) + "/" + name; }

const Host& named(const WanNetwork& net, const char* name) {
  const int i = net.topology().host_index(name);
  REQUIRE(i >= 0);
  return net.hosts()[static_cast<size_t>(i)];
}

sockaddr_in v4(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// One end of a simultaneous open: from `from`:local_port, connects to `to`:remote_port,
// starting at `start` and trying again (a fresh socket on the same port) after a refusal,
// until `deadline`. An invalid Fd when it never connected. No Catch assertions: it runs on
// its own thread.
Fd connect_from_port(const Host& from, uint16_t local_port, const Host& to, uint16_t remote_port,
                     Clock::time_point start, Clock::time_point deadline) {
  std::this_thread::sleep_until(start);
  const sockaddr_in local = v4(from.ip4, local_port);
  const sockaddr_in remote = v4(to.ip4, remote_port);
  while (Clock::now() < deadline) {
    Fd s;
    {
      ScopedNetns in(from.netns);
      s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    }
    if (s.fd < 0) return Fd();
    const int one = 1;
    ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.fd, reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) return Fd();
    if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&remote), sizeof remote) == 0) return s;
    if (errno != EINPROGRESS) return Fd();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{s.fd, POLLOUT, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) != 1) return Fd();
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // refused: the other end was not there yet
  }
  return Fd();
}

// Both ends at once (b `stagger` later), within `window`: the two sockets, either invalid.
std::pair<Fd, Fd> simultaneous_open(const Host& a, uint16_t port_a, const Host& b, uint16_t port_b,
                                    std::chrono::milliseconds window,
                                    std::chrono::milliseconds stagger = std::chrono::milliseconds(0)) {
  const auto start = Clock::now() + std::chrono::milliseconds(50);
  const auto deadline = start + window;
  auto at_a = std::async(std::launch::async, [&] { return connect_from_port(a, port_a, b, port_b, start, deadline); });
  auto at_b = std::async(std::launch::async,
                         [&] { return connect_from_port(b, port_b, a, port_a, start + stagger, deadline); });
  return {at_a.get(), at_b.get()};
}

// A dial from `from` to a listener on `to`:port that must fail: its SYN is dropped (the
// retransmission would come after 1 s) and nothing reaches the listener.
void check_refused(const Host& from, const Host& to, uint16_t port) {
  Fd listener = listen_on(to, port);
  CHECK(connect_from(from, to, port, 700).fd < 0);
  CHECK(accept_one(listener, 0).fd < 0);
}

// The port of the far end of a connected IPv4 socket.
uint16_t peer_port(const Fd& s) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  REQUIRE(::getpeername(s.fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("a closed host accepts no connection, and the ones it opens work both ways", "[wan][root][inbound]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(Topology::load(shipped("two-closed.json")));
  const Host& open_a = named(net, "open-a");
  const Host& open_b = named(net, "open-b");
  const Host& closed_a = named(net, "closed-a");
  // Refused from an open host and from a closed one alike; the same dial reaches an open host.
  check_refused(open_a, closed_a, 5601);
  check_refused(named(net, "closed-b"), closed_a, 5602);
  CHECK(net.stats().drop_closed >= 2);
  auto [to_open, at_open] = dial_and_accept(open_a, open_b, 5603);
  // A closed host dials out, and its connection carries data both ways.
  auto [client, server] = dial_and_accept(closed_a, open_a, 5604);
  check_both_ways(client, server);
  CHECK(net.stats().drop_stateful == 0);
}

TEST_CASE("a stateful host accepts no dial from outside, and the ones it opens work both ways",
          "[wan][root][inbound]") {
  if (skip_unless_root()) return;
  const Topology t = Topology::parse_json(R"({
      "defaults": {"rtt": "10ms", "uplink": "200mbit"},
      "hosts": [{"name": "o", "region": "r"}, {"name": "s", "region": "r", "inbound": "stateful"},
                {"name": "c", "region": "r", "inbound": "closed"}]})",
                                          "stateful, open and closed");
  WanNetwork net = WanNetwork::start(t);
  const Host& open = net.hosts()[0];
  const Host& stateful = net.hosts()[1];

  check_refused(open, stateful, 5611);
  CHECK(net.stats().drop_stateful >= 1);
  // Its own dial: the SYN-ACK comes back on a flow it opened.
  auto [client, server] = dial_and_accept(stateful, open, 5612);
  check_both_ways(client, server);
  CHECK(net.stats().drop_closed == 0);

  // With a closed host, a simultaneous open works too: the closed one's SYN passes on the
  // flow the stateful one opened (the other SYN is dropped), and its SYN-ACK goes back.
  const Host& closed = net.hosts()[2];
  auto [sc, cs] = simultaneous_open(stateful, 5613, closed, 5614, std::chrono::milliseconds(4000));
  REQUIRE(sc.fd >= 0);
  REQUIRE(cs.fd >= 0);
  CHECK(net.stats().drop_closed >= 1);
  check_both_ways(sc, cs);
  CHECK(net.stats().flows_evicted == 0);
}

TEST_CASE("a TCP simultaneous open links two stateful hosts that cannot dial each other", "[wan][root][inbound]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(Topology::load(shipped("all-stateful.json")));
  const Host& a = named(net, "nat-a");
  const Host& b = named(net, "nat-b");
  REQUIRE(net.topology().hosts[static_cast<size_t>(net.topology().host_index("nat-a"))].inbound ==
          InboundPolicy::stateful);

  // A plain dial between them fails.
  check_refused(a, b, 5621);
  CHECK(net.stats().drop_stateful >= 1);

  // Both at once: one connection, both ends on the agreed ports.
  auto [ab, ba] = simultaneous_open(a, 5622, b, 5623, std::chrono::milliseconds(4000));
  REQUIRE(ab.fd >= 0);
  REQUIRE(ba.fd >= 0);
  CHECK(peer_port(ab) == 5623);
  CHECK(peer_port(ba) == 5622);
  check_both_ways(ab, ba);

  // d starts 150 ms after c (the RTT is 40 ms): c's first SYN reaches d before d asked for
  // it and is dropped, then d's SYN passes c on the flow c opened, and c's SYN-ACK passes d.
  const uint64_t before = net.stats().drop_stateful;
  const Host& c = named(net, "nat-c");
  const Host& d = named(net, "nat-d");
  auto [cd, dc] = simultaneous_open(c, 5624, d, 5625, std::chrono::milliseconds(4000), std::chrono::milliseconds(150));
  REQUIRE(cd.fd >= 0);
  REQUIRE(dc.fd >= 0);
  CHECK(net.stats().drop_stateful > before);
  check_both_ways(cd, dc);
  CHECK(net.stats().drop_closed == 0);
}

TEST_CASE("a TCP simultaneous open fails between two closed hosts", "[wan][root][inbound]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(Topology::load(shipped("two-closed.json")));
  const Host& a = named(net, "closed-a");
  const Host& b = named(net, "closed-b");
  // 2.5 s: each side's first SYN and its retransmission after 1 s, all dropped.
  auto [ab, ba] = simultaneous_open(a, 5631, b, 5632, std::chrono::milliseconds(2500));
  CHECK(ab.fd < 0);
  CHECK(ba.fd < 0);
  CHECK(net.stats().drop_closed >= 4);
  CHECK(net.stats().drop_stateful == 0);
  // The same two ports punch through when both hosts are stateful (the case above) and
  // when one end is open: the simultaneous-open code is not what fails.
  const Host& open = named(net, "open-a");
  auto [ao, oa] = simultaneous_open(a, 5633, open, 5634, std::chrono::milliseconds(4000));
  CHECK(ao.fd >= 0);
  CHECK(oa.fd >= 0);
}
