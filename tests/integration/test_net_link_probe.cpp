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
  explicit Target(bool same_host, peer::LinkProber::Report report = [](wire::ProbeDone) {})
      : prober(io.io.get_executor(), options(same_host), std::move(report)),
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

// A target that accepts no connection (dial-out-only) dials its prober instead; the prober
// measures over the connections it is given. Here the target hears its round first, as
// happens when the master's message reaches it sooner: its connections wait for the probe.
TEST_CASE("link probe: a target that accepts no connection dials its prober, which measures over them",
          "[probe][dial_out_only]") {
  std::promise<wire::ProbeDone> prober_done, target_done;
  Target prober(false, [&](wire::ProbeDone done) { prober_done.set_value(std::move(done)); });  // peer 3, listening
  Io io;
  peer::LinkProber target(io.io.get_executor(), options(false),
                          [&](wire::ProbeDone done) { target_done.set_value(std::move(done)); });  // peer 7
  wire::ProbeRound target_round{5, 2, {}, {3}, {}, {{3, "127.0.0.1", prober.listener->port(), {}}}};
  target.start_round(target_round, 7);
  std::this_thread::sleep_for(200ms);
  // The target's address is never dialed: its port here is one nothing listens on.
  prober.prober.start_round(wire::ProbeRound{5, 2, {{7, "127.0.0.1", 1, {}}}, {}, {1}, {}}, 3);
  auto answered = prober_done.get_future();
  REQUIRE(answered.wait_for(20s) == std::future_status::ready);
  wire::ProbeDone done = answered.get();
  CHECK(done.unreachable.empty());
  REQUIRE(done.links.size() == 1);
  CHECK(done.links[0].from_peer == 3);
  CHECK(done.links[0].to_peer == 7);
  CHECK(done.links[0].connections == peer::kProbeLanes);
  CHECK(done.links[0].goodput_bps > 0);
  auto target_answer = target_done.get_future();
  REQUIRE(target_answer.wait_for(20s) == std::future_status::ready);
  wire::ProbeDone quiet = target_answer.get();
  CHECK(quiet.links.empty());
  CHECK(quiet.unreachable.empty());
}

TEST_CASE("link probe: a target that should dial its prober and never does is reported unreachable",
          "[probe][dial_out_only]") {
  std::promise<wire::ProbeDone> prober_done;
  Target prober(false, [&](wire::ProbeDone done) { prober_done.set_value(std::move(done)); });
  prober.prober.start_round(wire::ProbeRound{5, 2, {{7, "127.0.0.1", 1, {}}}, {}, {1}, {}}, 3);
  auto answered = prober_done.get_future();
  REQUIRE(answered.wait_for(30s) == std::future_status::ready);
  wire::ProbeDone done = answered.get();
  CHECK(done.links.empty());
  CHECK(done.unreachable == std::vector<uint64_t>{7});
}
