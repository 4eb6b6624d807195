// Link probes (peer/link_probe.h) between two probers over real loopback
// sockets: a rate over the probe's own connections, a same-host pair that
// stops at its welcome, and a target nobody listens on reported unreachable.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>

#include "io_thread.h"
#include "net/listener.h"
#include "net/stranger_gate.h"
#include "net/transport.h"
#include "peer/link_probe.h"
#include "peer/p2p_inbound.h"

using namespace ferry;
using namespace std::chrono_literals;

namespace {

using Io = test::IoThread;

peer::LinkOptions options(bool same_host) {
  peer::LinkOptions o;
  o.transport = net::make_tcp_transport();
  o.timeout = 5s;
  o.same_host.enabled = same_host;
  return o;
}

// A prober whose probe_hellos arrive through a real p2p listener.
struct Target {
  Io io;
  peer::LinkProber prober;
  std::shared_ptr<net::Listener> listener;
  explicit Target(bool same_host)
      : prober(io.io.get_executor(), options(same_host), [](wire::ProbeDone) {}),
        listener(net::Listener::bind(io.io.get_executor(), "127.0.0.1", 0, 0)) {
    auto opts = options(same_host);
    listener->start(net::StrangerGate::create("probe test"),
                    [this, opts](asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> pass) {
                      peer::accept_p2p(std::move(socket), std::move(pass), opts,
                                       {[](const wire::LinkHello&, const std::string&,
                                           const std::shared_ptr<net::Stream>& s) { s->close(); },
                                        [](const wire::FetchHello&, const std::string&,
                                           const std::shared_ptr<net::Stream>& s) { s->close(); },
                                        [this](const wire::ProbeHello& hello, const std::string& proof,
                                               const std::shared_ptr<net::Stream>& s) { prober.accept(hello, proof, s); }});
                    });
  }
  ~Target() { listener->stop(); }
};

wire::ProbeDone probe(uint16_t port, bool same_host) {
  Io io;
  std::promise<wire::ProbeDone> answered;
  peer::LinkProber prober(io.io.get_executor(), options(same_host),
                          [&](wire::ProbeDone done) { answered.set_value(std::move(done)); });
  prober.start_round(wire::ProbeRound{5, 2, {{7, "127.0.0.1", port, {}}}, {}}, 3);
  auto future = answered.get_future();
  REQUIRE(future.wait_for(20s) == std::future_status::ready);
  return future.get();
}

}  // namespace

TEST_CASE("link probe: a rate over the probe's own connections, and a same-host pair stops at its welcome",
          "[probe]") {
  const bool same_host = GENERATE(false, true);
  INFO("same host " << same_host);
  Target target(same_host);
  wire::ProbeDone done = probe(target.listener->port(), same_host);
  CHECK(done.epoch == 5);
  CHECK(done.round == 2);
  CHECK(done.unreachable.empty());
  REQUIRE(done.links.size() == 1);
  const wire::LinkEntry& e = done.links[0];
  CHECK(e.from_peer == 3);
  CHECK(e.to_peer == 7);
  if (same_host) {
    CHECK(e.shared_memory == 1);
    CHECK(e.connections == 0);
    CHECK(e.goodput_bps == 0);
  } else {
    CHECK(e.shared_memory == 0);
    CHECK(e.connections == peer::kProbeLanes);
    CHECK(e.goodput_bps > 0);
    CHECK(e.bytes > 0);
    CHECK(e.rtt_us > 0);
  }
}

TEST_CASE("link probe: a target nobody listens on is reported unreachable", "[probe]") {
  uint16_t closed;
  {
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    closed = acceptor.local_endpoint().port();
  }
  wire::ProbeDone done = probe(closed, false);
  CHECK(done.links.empty());
  CHECK(done.unreachable == std::vector<uint64_t>{7});
}
