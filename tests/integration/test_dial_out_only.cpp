// Peers that accept no connection (ferry_comm_params.dial_out_only), as behind
// NAT or an inbound firewall: they open no listener, the master has every link
// with them dialed from their side (master/link_dialers.h), and they keep
// their place in the ring with results bit-identical to everyone's.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <vector>

#include "core/hash.h"
#include "harness.h"

using namespace ferry::test;

namespace {

// A loopback port nothing listens on now.
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Whether something listens on 127.0.0.1:port (a connection is taken).
bool listened_on(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return connected;
}

}  // namespace

// Two of four: an alternating ring dials every link from one end. All four: no ring of
// dialed links exists, so every link is punched (a TCP simultaneous open, net/punch.h),
// which loopback, with no firewall in the way, lets through.
TEST_CASE("dial-out-only: two or all of four peers accept nothing, all four form one ring, results bit-identical",
          "[dial_out_only][tls][punch]") {
  const Wire wire = GENERATE(Wire::plain, Wire::tls, Wire::shm);
  const std::set<size_t> closed = GENERATE(std::set<size_t>{1, 3}, std::set<size_t>{0, 1, 2, 3});
  WireScope scope(wire);
  INFO(wire_name(wire) << ", " << closed.size() << " dial-out-only");
  EmbeddedMaster master;
  const size_t peers = 4;
  std::vector<uint16_t> ports(peers);
  for (auto& p : ports) p = free_port();
  std::vector<uint64_t> hashes(peers);
  std::vector<std::string> problems(peers);
  auto results = run_peers(peers, [&](size_t i) {
    PeerSettings settings;
    settings.port = ports[i];  // the port its listener would take
    settings.dial_out_only = closed.count(i) > 0;
    ferry_comm* comm = create_peer(master.address(), settings);
    if (settings.dial_out_only == listened_on(ports[i]))
      problems[i] += settings.dial_out_only ? "a dial-out-only peer listens\n" : "a peer does not listen\n";
    grow_group(comm, static_cast<int64_t>(peers));
    std::vector<float> data(300'000);
    for (size_t k = 0; k < data.size(); ++k) data[k] = static_cast<float>((k * 7 + i * 13) % 101) * 0.25f;
    for (int round = 0; round < 3; ++round) {
      ferry_allreduce_desc desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM);
      desc.tag = static_cast<uint64_t>(round);
      must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
    }
    // Sums of quarter-integers far below 2^24: exact, so each element is known.
    for (size_t k = 0; k < data.size(); ++k) {
      float one_round = 0;
      for (size_t r = 0; r < peers; ++r) one_round += static_cast<float>((k * 7 + r * 13) % 101) * 0.25f;
      float want = one_round * 16;  // three rounds of sums of 4 peers: x4 each after the first
      if (data[k] != want) {
        problems[i] += "element " + std::to_string(k) + " is " + std::to_string(data[k]) + "\n";
        break;
      }
    }
    hashes[i] = ferry::hash_bytes(data.data(), data.size() * sizeof(float));
    if (attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) != static_cast<int64_t>(peers)) problems[i] += "world\n";
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t i = 0; i < peers; ++i) CHECK(problems[i] == "");
  for (size_t i = 1; i < peers; ++i) CHECK(hashes[i] == hashes[0]);
}

TEST_CASE("dial-out-only: a flag other than 0 or 1 is refused at create", "[dial_out_only][misuse]") {
  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = "127.0.0.1:1";
  params.dial_out_only = 2;
  ferry_comm* comm = nullptr;
  CHECK(ferry_comm_create(&params, &comm) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(comm == nullptr);
  CHECK(std::string(ferry_last_error()).find("dial_out_only") != std::string::npos);
}
