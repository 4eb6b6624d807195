// A dial of a port nothing listens on must not end connected to itself: the
// socket would hold the port that a listener started again there needs (a
// restarted ferry-master, while its peers redial it). Forced in a namespace of
// our own whose kernel has exactly the dialed port to give as a source port.
#include <catch2/catch.hpp>

#include <asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <optional>

#include "command.h"
#include "netns.h"
#include "net/dialer.h"
#include "net/transport.h"
#include "wan_network.h"
#include "wan_sockets.h"

using namespace ferry::wan;
using namespace ferry::wan::test;

TEST_CASE("a dial to a port of this host that nothing listens on fails instead of connecting to itself, and leaves "
          "the port to a listener",
          "[wan][root][dial]") {
  if (skip_unless_root()) return;
  WanNetwork net = WanNetwork::start(WanConfig::parse("hosts=2,rtt=1ms,loss=0,rate=1gbit,cc=cubic"));
  const Host& host = net.hosts()[0];
  constexpr uint16_t kPort = 40000;  // even: where the kernel starts its search for a connect()
  run_checked({"ip", "netns", "exec", host.netns, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40001"});
  ScopedNetns inside(host.netns);  // the io thread below is this one: its sockets are made in there

  asio::io_context io;
  std::optional<ferry::Status> result;
  ferry::net::dial(io.get_executor(), ferry::net::Endpoint{"127.0.0.1", kPort}, std::chrono::milliseconds(3000),
                   ferry::net::make_tcp_transport(),
                   [&](ferry::Status status, std::shared_ptr<ferry::net::Stream> stream) {
                     result = status;
                     if (stream) stream->close();
                   });
  io.run_for(std::chrono::seconds(10));
  REQUIRE(result.has_value());
  CHECK_FALSE(result->ok());
  CHECK_THAT(result->message, Catch::Contains("connected to itself"));
  // The port is free again at once: a listener binds it (with SO_REUSEADDR, as ferry's do).
  Fd listener = listen_on(host, kPort, "127.0.0.1");
  CHECK(listener.fd >= 0);
}
