#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <random>

#include "delay_line.h"

using ferry::wan::DelayLine;

namespace {

void put(DelayLine& line, uint32_t len, uint64_t release, uint16_t dst, uint8_t fill) {
  std::byte* slot = line.reserve();
  REQUIRE(slot != nullptr);
  std::memset(slot, fill, len);
  line.commit(len, release, dst);
}

}  // namespace

TEST_CASE("delay line is a FIFO that keeps every byte", "[wan][delay_line]") {
  DelayLine line(64 * 1024, 1600);
  put(line, 60, 10, 1, 0xaa);
  put(line, 1500, 20, 2, 0xbb);
  put(line, 1, 30, 0, 0xcc);
  CHECK(line.packets() == 3);

  const DelayLine::Header* h = line.front();
  REQUIRE(h);
  CHECK(h->len == 60);
  CHECK(h->release_ns == 10);
  CHECK(h->dst == 1);
  CHECK(DelayLine::data(h)[59] == std::byte{0xaa});
  line.pop();
  h = line.front();
  REQUIRE(h);
  CHECK(h->len == 1500);
  CHECK(DelayLine::data(h)[1499] == std::byte{0xbb});
  line.pop();
  h = line.front();
  REQUIRE(h);
  CHECK(h->dst == 0);
  line.pop();
  CHECK(line.front() == nullptr);
  CHECK(line.empty());
}

TEST_CASE("delay line wraps and fills up and refuses rather than overwrites", "[wan][delay_line]") {
  DelayLine line(8 * 1024, 1500);  // rounded up to 4 maximum records
  std::mt19937 rng(5);
  std::deque<std::pair<uint32_t, uint8_t>> expect;
  uint64_t t = 0;
  size_t refused = 0;
  for (int round = 0; round < 20000; ++round) {
    if (rng() % 3 != 0) {
      std::byte* slot = line.reserve();
      if (!slot) {
        ++refused;
        CHECK(!expect.empty());
        continue;
      }
      const auto len = static_cast<uint32_t>(1 + rng() % 1500);
      const auto fill = static_cast<uint8_t>(rng());
      std::memset(slot, fill, len);
      if (rng() % 5 == 0) continue;  // reserved but dropped: must leave no trace
      line.commit(len, ++t, 0);
      expect.emplace_back(len, fill);
    } else if (!expect.empty()) {
      const DelayLine::Header* h = line.front();
      REQUIRE(h);
      REQUIRE(h->len == expect.front().first);
      REQUIRE(DelayLine::data(h)[0] == std::byte{expect.front().second});
      REQUIRE(DelayLine::data(h)[h->len - 1] == std::byte{expect.front().second});
      line.pop();
      expect.pop_front();
    } else {
      CHECK(line.front() == nullptr);
    }
    REQUIRE(line.packets() == expect.size());
    REQUIRE(line.bytes_used() <= line.capacity());
  }
  CHECK(refused > 0);
}
