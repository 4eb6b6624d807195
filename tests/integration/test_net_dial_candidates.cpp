// A peer's addresses in both families (peer/dial_candidates.h) over real
// loopback sockets: the dialer goes on to the next candidate when one cannot
// be connected, and names every candidate when none can.
#include <catch2/catch.hpp>

#include <future>
#include <thread>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ip/v6_only.hpp>

#include "io_thread.h"
#include "net/dialer.h"
#include "net/transport.h"
#include "peer/dial_candidates.h"

using namespace ferry;
using namespace std::chrono_literals;

namespace {

using Io = test::IoThread;

// A listener on ::1 only (IPV6_V6ONLY): 127.0.0.1 at its port refuses.
struct V6OnlyListener {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  V6OnlyListener() {
    asio::ip::tcp::endpoint at(asio::ip::make_address("::1"), 0);
    acceptor.open(at.protocol());
    acceptor.set_option(asio::ip::v6_only(true));
    acceptor.bind(at);
    acceptor.listen();
  }
  uint16_t port() const { return acceptor.local_endpoint().port(); }
};

Status dial(Io& io, const wire::PeerAddress& to) {
  std::promise<Status> done;
  net::dial(io.io.get_executor(), peer::dial_candidates(to), 5000ms, net::make_tcp_transport(),
            [&done](Status st, std::shared_ptr<net::Stream> stream) {
              if (stream) stream->close();
              done.set_value(st);
            });
  return done.get_future().get();
}

}  // namespace

TEST_CASE("dial: a peer that takes IPv6 only is reached at its other address when the one the master saw refuses",
          "[net][address]") {
  Io io;
  V6OnlyListener listener;
  wire::PeerAddress peer{7, "127.0.0.1", listener.port(), {"::1"}};
  REQUIRE(peer::dial_candidates(peer).size() == 2);
  CHECK(peer::dial_candidates(peer)[0].host == "127.0.0.1");  // the master's view first

  Status reached = dial(io, peer);
  INFO(reached.message);
  CHECK(reached.ok());

  SECTION("without the other address it cannot be reached") {
    peer.other_hosts.clear();
    Status refused = dial(io, peer);
    CHECK(refused.code == Errc::connect);
    CHECK_THAT(refused.message, Catch::Contains("127.0.0.1:" + std::to_string(listener.port())));
  }
}

TEST_CASE("dial: when no candidate takes the connection, the error names every one tried", "[net][address]") {
  Io io;
  uint16_t closed = 0;
  {
    V6OnlyListener gone;  // a port that was just free on ::1, closed again
    closed = gone.port();
  }
  Status st = dial(io, {7, "127.0.0.1", closed, {"::1"}});
  CHECK(st.code == Errc::connect);
  CHECK_THAT(st.message, Catch::Contains("127.0.0.1:" + std::to_string(closed) + " or [::1]:" + std::to_string(closed)));
}
