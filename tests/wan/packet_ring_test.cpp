#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <random>

#include "packet_ring.h"
#include "release_schedule.h"
#include "token_bucket.h"

using ferry::wan::PacketRing;
using ferry::wan::ReleaseSchedule;
using ferry::wan::TokenBucket;

namespace {

uint64_t put(PacketRing& ring, uint32_t len, uint8_t fill) {
  std::byte* slot = ring.reserve();
  REQUIRE(slot != nullptr);
  std::memset(slot, fill, len);
  return ring.commit(len);
}

}  // namespace

TEST_CASE("packet ring frees space in arrival order once released", "[wan][packet_ring]") {
  PacketRing ring(8 * 1024, 1500);  // rounded up to 4 maximum records
  const uint64_t a = put(ring, 1500, 0xaa);
  const uint64_t b = put(ring, 60, 0xbb);
  CHECK(ring.packets() == 2);
  CHECK(PacketRing::data(ring.header(a))[1499] == std::byte{0xaa});
  // The younger record goes first (a shorter delay): its space stays held behind the older.
  ring.release(b);
  ring.reclaim();
  const size_t held = ring.bytes_used();
  CHECK(held > 1500);
  ring.release(a);
  ring.reclaim();
  CHECK(ring.bytes_used() == 0);
  CHECK(ring.packets() == 0);
}

TEST_CASE("packet ring wraps and fills up and refuses rather than overwrites", "[wan][packet_ring]") {
  PacketRing ring(8 * 1024, 1500);
  std::mt19937 rng(5);
  std::deque<std::tuple<uint64_t, uint32_t, uint8_t>> live;
  size_t refused = 0;
  for (int round = 0; round < 20000; ++round) {
    if (rng() % 3 != 0) {
      std::byte* slot = ring.reserve();
      if (!slot) {
        ++refused;
        CHECK(!live.empty());
        continue;
      }
      const auto len = static_cast<uint32_t>(1 + rng() % 1500);
      const auto fill = static_cast<uint8_t>(rng());
      std::memset(slot, fill, len);
      if (rng() % 5 == 0) continue;  // reserved but dropped: must leave no trace
      live.emplace_back(ring.commit(len), len, fill);
    } else if (!live.empty()) {
      // Release any live record, not only the oldest: out-of-order departures.
      const size_t i = rng() % live.size();
      auto [pos, len, fill] = live[i];
      PacketRing::Header* h = ring.header(pos);
      REQUIRE(h->len == len);
      REQUIRE(PacketRing::data(h)[0] == std::byte{fill});
      REQUIRE(PacketRing::data(h)[len - 1] == std::byte{fill});
      ring.release(pos);
      ring.reclaim();
      live.erase(live.begin() + static_cast<long>(i));
    }
    REQUIRE(ring.packets() == live.size());
    REQUIRE(ring.bytes_used() <= ring.capacity());
  }
  CHECK(refused > 0);
}

// Two pairs with different delays: the one with the shorter delay overtakes, and each pair
// keeps its own order.
TEST_CASE("release schedule releases by time across queues and in order within one", "[wan][packet_ring]") {
  PacketRing ring(64 * 1024, 1500);
  ReleaseSchedule schedule(ring, 3);
  auto add = [&](size_t q, uint64_t time, uint8_t tag) {
    const uint64_t pos = put(ring, 10, tag);
    ring.header(pos)->time_ns = time;
    schedule.push(q, pos);
  };
  CHECK(schedule.empty(0));
  add(0, 100, 1);  // long-delay pair, arrived first
  CHECK_FALSE(schedule.empty(0));
  add(0, 101, 2);
  add(1, 20, 3);   // short-delay pair, arrived later, due earlier
  add(1, 21, 4);
  add(2, 100, 5);

  uint64_t next = 0;
  REQUIRE(schedule.next_time(next));
  CHECK(next == 20);
  uint64_t pos = 0;
  size_t q = 0;
  CHECK_FALSE(schedule.pop_due(19, pos, q));
  std::vector<int> order;
  while (schedule.pop_due(1000, pos, q)) order.push_back(static_cast<int>(PacketRing::data(ring.header(pos))[0]));
  CHECK(order == std::vector<int>{3, 4, 1, 5, 2});
  CHECK(schedule.empty());
  CHECK(schedule.empty(0));
}

TEST_CASE("token bucket passes a burst, then paces at its rate, and refuses past its queue", "[wan][packet_ring]") {
  // 8 Mbit/s: 1000 bytes take 1 ms. Bucket 2000 bytes, queue 5000 bytes (5 ms).
  TokenBucket bucket(8'000'000, 2000, 5000);
  const uint64_t t0 = 1'000'000'000;
  uint64_t depart = 0;
  REQUIRE(bucket.admit(t0, 1000, depart));
  CHECK(depart == t0);  // a full bucket: at once
  REQUIRE(bucket.admit(t0, 1000, depart));
  CHECK(depart == t0);
  REQUIRE(bucket.admit(t0, 1000, depart));
  CHECK(depart == t0 + 1'000'000);  // empty: 1 ms later
  for (int i = 0; i < 4; ++i) REQUIRE(bucket.admit(t0, 1000, depart));
  CHECK(depart == t0 + 5'000'000);
  CHECK_FALSE(bucket.admit(t0, 1000, depart));  // 6 ms of queue > 5 ms
  REQUIRE(bucket.admit(t0 + 10'000'000, 1000, depart));  // idle again: full bucket
  CHECK(depart == t0 + 10'000'000);

  TokenBucket unshaped;
  REQUIRE(unshaped.admit(t0, 60000, depart));
  CHECK(depart == t0);
}
