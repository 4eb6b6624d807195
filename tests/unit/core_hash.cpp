// hash_bytes is XXH3-64: peers on different machines must agree, so the
// output is pinned against the algorithm's published values.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/hash.h"

using namespace ferry;

TEST_CASE("hash_bytes is XXH3-64 with seed", "[core][hash]") {
  CHECK(hash_bytes(nullptr, 0) == 0x2D06800538D394C2ull);  // XXH3_64bits of the empty input
  const std::string text = "ferry";
  CHECK(hash_bytes(text.data(), text.size()) == hash_bytes(text.data(), text.size(), 0));
  CHECK(hash_bytes(text.data(), text.size(), 1) != hash_bytes(text.data(), text.size(), 0));

  // Every byte matters, whatever its position, including across XXH3's size classes.
  for (const size_t size : {1u, 3u, 16u, 17u, 128u, 129u, 240u, 241u, 4096u, 100'000u}) {
    std::vector<unsigned char> data(size, 0x5a);
    const uint64_t before = hash_bytes(data.data(), data.size(), 7);
    data[size / 2] ^= 1;
    CHECK(hash_bytes(data.data(), data.size(), 7) != before);
  }
}
