// Malformed and out-of-place frames thrown at a live master from raw
// sockets, while a real run goes on: each bad connection is closed, the
// master keeps serving, and the good peers' results stay correct.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "forged_frame.h"
#include "harness.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry::test;
namespace wire = ferry::wire;

namespace {

class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { ::close(fd_); }
  bool connected() const { return connected_; }
  void send(const std::vector<uint8_t>& bytes) { (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  void finish_writing() { ::shutdown(fd_, SHUT_WR); }

  // True once the master closed the connection (EOF or reset) within the deadline;
  // frames it sent first (a kick) are read and counted.
  bool closed_by_master(std::chrono::seconds deadline, size_t* bytes_before = nullptr) {
    auto end = std::chrono::steady_clock::now() + deadline;
    size_t total = 0;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      uint8_t buf[4096];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        if (bytes_before) *bytes_before = total;
        return true;
      }
      total += static_cast<size_t>(n);
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

wire::Hello good_hello() {
  wire::Hello h;
  h.peer_group = 4242;  // away from the good run's group
  h.advertised_port = 9;
  h.p2p_connections = 1;
  h.heartbeat_timeout_ms = 5000;
  return h;
}

struct Garbage {
  const char* name;
  std::vector<uint8_t> bytes;
  bool then_half_close;
  bool expect_kick_frame;  // a well-formed but forbidden message is answered with a kick
};

std::vector<Garbage> garbage_cases() {
  std::vector<uint8_t> noise(1000);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<uint8_t>(i * 131 + 7);
  auto hello = wire::encode_message(good_hello());
  auto hello_bad = good_hello();
  hello_bad.p2p_connections = 0;
  auto hello_trailing = hello;
  hello_trailing.push_back(0xEE);
  hello_trailing[8] = static_cast<uint8_t>(hello_trailing[8] + 1);  // length covers the extra byte
  return {
      {"random bytes", noise, false, false},
      {"wrong magic", forged_frame_header(0xDEADBEEF, 1, 1, 0), false, false},
      {"wrong version", forged_frame_header(wire::kFrameMagic, 99, 1, 0), false, false},
      {"unknown type", concat(forged_frame_header(wire::kFrameMagic, 1, 999, 4), {1, 2, 3, 4}), false, false},
      {"oversized length", forged_frame_header(wire::kFrameMagic, 1, 1, 100u << 20), false, false},
      {"truncated frame", concat(forged_frame_header(wire::kFrameMagic, 1, 1, 100), {1, 2, 3}), true, false},
      {"hello with trailing bytes", hello_trailing, false, false},
      {"vote before hello", wire::encode_message(wire::TopologyVote{}), false, true},
      {"hello with zero connections", wire::encode_message(hello_bad), false, true},
      {"master-only message after hello", concat(hello, wire::encode_message(wire::Welcome{1, "x", ""})), false, true},
      {"collective while pending", concat(hello, wire::encode_message(wire::CollectiveBegin{})), false, true},
      {"link handshake at the master", wire::encode_message(wire::LinkHello{}), false, true},
  };
}

}  // namespace

TEST_CASE("master: malformed and forbidden frames close their connection, the run goes on unharmed",
          "[master][robustness]") {
  EmbeddedMaster master;
  std::string garbage_problems;
  std::atomic<bool> run_started{false};
  // Every connection first receives the master's auth challenge; a kick comes after it.
  const size_t challenge_bytes = wire::encode_message(wire::AuthChallenge{std::string(32, 'n'), 0}).size();
  std::thread attacker([&] {
    while (!run_started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (const auto& g : garbage_cases()) {
      for (int round = 0; round < 3; ++round) {
        RawClient client(master.port());
        if (!client.connected()) {
          garbage_problems += std::string(g.name) + ": could not connect\n";
          continue;
        }
        client.send(g.bytes);
        if (g.then_half_close) client.finish_writing();
        size_t answered = 0;
        if (!client.closed_by_master(std::chrono::seconds(8), &answered))
          garbage_problems += std::string(g.name) + ": connection left open\n";
        else if (g.expect_kick_frame && answered <= challenge_bytes)
          garbage_problems += std::string(g.name) + ": closed without a kick message\n";
      }
    }
  });

  const size_t peers = 3, rounds = 60;
  std::vector<std::string> wrong(peers);
  auto results = run_peers(peers, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, peers);
    if (who == 0) run_started = true;
    std::vector<float> data(50000);
    for (size_t round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((i + round) % 7);
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
      for (size_t i = 0; i < data.size(); ++i)
        if (data[i] != static_cast<float>(peers * ((i + round) % 7))) {
          wrong[who] += "round " + std::to_string(round) + " element " + std::to_string(i) + "\n";
          break;
        }
    }
    ferry_comm_destroy(comm);
  });
  attacker.join();
  REQUIRE(failures(results) == "");
  CHECK(garbage_problems == "");
  for (auto& w : wrong) CHECK(w == "");

  // And the master still admits and serves a fresh run.
  auto again = run_peers(2, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    double one = 1.0;
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    desc.dtype = FERRY_F64;
    must(ferry_allreduce(comm, &one, &one, 1, &desc, nullptr), "ferry_allreduce");
    if (one != 2.0) throw std::runtime_error("wrong sum after the storm");
    ferry_comm_destroy(comm);
  });
  CHECK(failures(again) == "");
}
