// The master's handshake is bounded for strangers: until a connection's hello
// is accepted it may announce only small frames, and its hello must come
// within a deadline counted from the accept, which heartbeats do not push back.
// Driven from raw sockets against a MasterServer with a short hello deadline.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "../integration/forged_frame.h"
#include "master/master_server.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kHelloDeadline = 800ms;

class Stranger {
 public:
  explicit Stranger(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~Stranger() { ::close(fd_); }
  void send(const std::vector<uint8_t>& bytes) { (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }

  // Reads what the master sends for up to `wait`; true once it closed the connection.
  bool closed_within(std::chrono::milliseconds wait) {
    auto end = Clock::now() + wait;
    while (Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      uint8_t buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
      received_ += static_cast<size_t>(n);
    }
    return false;
  }
  size_t received() const { return received_; }

 private:
  int fd_ = -1;
  size_t received_ = 0;
};

struct ShortDeadlineMaster {
  master::MasterServer server{[] {
    master::MasterServerOptions o;
    o.listen_host = "127.0.0.1";
    o.listen_port = 0;
    o.hello_timeout = kHelloDeadline;
    return o;
  }()};
  ShortDeadlineMaster() { server.start(); }
};

wire::Hello valid_hello() {
  wire::Hello h;
  h.advertised_port = 9;
  h.p2p_connections = 1;
  h.heartbeat_timeout_ms = 5000;
  h.nonce = "n";
  return h;
}

}  // namespace

TEST_CASE("master: heartbeats before a hello do not keep a stranger's connection past the hello deadline",
          "[master][robustness]") {
  ShortDeadlineMaster master;
  Stranger stranger(master.server.port());
  auto start = Clock::now();
  bool closed = false;
  // Heartbeats every 100 ms: a silence deadline would never fire.
  while (!closed && Clock::now() - start < 8 * kHelloDeadline) {
    stranger.send(wire::encode_message(wire::Heartbeat{}));
    closed = stranger.closed_within(100ms);
  }
  CHECK(closed);
  CHECK(Clock::now() - start < 4 * kHelloDeadline);
}

TEST_CASE("master: before its hello a connection may not announce a frame of more than a few KiB",
          "[master][robustness]") {
  ShortDeadlineMaster master;
  Stranger stranger(master.server.port());
  // A header announcing a 1 MiB hello, then nothing: the master must refuse it
  // at the header, not allocate the megabyte and wait out the hello deadline.
  stranger.send(test::forged_frame_header(wire::kFrameMagic, wire::kProtocolVersion,
                                          static_cast<uint16_t>(wire::MessageType::hello), 1u << 20));
  auto start = Clock::now();
  CHECK(stranger.closed_within(5 * kHelloDeadline));
  CHECK(Clock::now() - start < kHelloDeadline / 2);
}

TEST_CASE("master: a peer whose hello is accepted in time stays past the hello deadline", "[master][robustness]") {
  ShortDeadlineMaster master;
  Stranger peer(master.server.port());
  peer.send(wire::encode_message(valid_hello()));
  auto start = Clock::now();
  // It answers heartbeats within its own (5 s) deadline: nothing closes it after the hello deadline.
  bool closed = false;
  while (!closed && Clock::now() - start < 3 * kHelloDeadline) {
    peer.send(wire::encode_message(wire::Heartbeat{}));
    closed = peer.closed_within(100ms);
  }
  CHECK_FALSE(closed);
  CHECK(peer.received() > 0);  // the challenge and the welcome
}
