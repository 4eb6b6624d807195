// The ports punched connections bind (net/punch.h): both ends compute the same one,
// and no two connections that may be punched at once between peers on one address
// share a port (they would ask for one 4-tuple and cross).
#include <catch2/catch.hpp>

#include <set>

#include "net/punch.h"

using ferry::net::punch_key;
using ferry::net::punch_port;
using ferry::net::PunchUse;

TEST_CASE("punch ports: every lane of every link of one ring has its own two ports, in every epoch",
          "[net][punch]") {
  // Rings of 2 and 5 links at the lane counts peers use; a two-peer ring is the case that
  // crossed: its two links join the same two peers, so overlapping windows met.
  for (uint32_t links : {2u, 5u}) {
    for (uint32_t lanes : {1u, 3u, 8u, 64u}) {
      for (uint64_t epoch = 1; epoch <= 2000; ++epoch) {
        const uint64_t key = punch_key({epoch, 0});
        std::set<uint16_t> ports;
        for (uint32_t slot = 0; slot < links * lanes; ++slot)
          for (int end : {0, 1}) {
            uint16_t port = punch_port(PunchUse::ring_link, key, slot, end);
            REQUIRE(port >= 61000);
            REQUIRE(port < 64000);
            REQUIRE(ports.insert(port).second);
          }
      }
    }
  }
}

TEST_CASE("punch ports: fetches draw from a block of their own, and a slot's two ends differ by one",
          "[net][punch]") {
  for (uint64_t seq = 0; seq < 500; ++seq) {
    const uint64_t key = punch_key({7, seq, 11, 12});
    for (uint32_t k = 0; k < 64; ++k) {
      uint16_t sender = punch_port(PunchUse::fetch, key, k, 0), receiver = punch_port(PunchUse::fetch, key, k, 1);
      REQUIRE(sender >= 64000);
      REQUIRE(sender % 2 == 0);
      REQUIRE(receiver == sender + 1);
    }
  }
  // The key depends on every part and on their order (a link's sender and receiver differ).
  CHECK(punch_key({1, 2}) != punch_key({2, 1}));
  CHECK(punch_key({1, 2}) != punch_key({1, 3}));
  CHECK(punch_key({1, 2, 0}) != punch_key({1, 2}));
}
