// hash_bytes is XXH3-64: peers on different machines must agree, so the
// output is pinned against the algorithm's published values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "core/content_hash.h"
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

TEST_CASE("content_hash_from_blocks rebuilds the content hash from block hashes", "[core][hash]") {
  // Shared-state fetches verify tensors this way, chunk by chunk (one chunk = one block).
  for (const size_t size : {size_t{0}, size_t{1000}, kContentHashBlock, 2 * kContentHashBlock + 12345}) {
    std::vector<unsigned char> data(size);
    for (size_t i = 0; i < size; ++i) data[i] = static_cast<unsigned char>(i * 131 + i / 7);
    const std::pair<const void*, size_t> buffer{data.data(), size};
    uint64_t whole = 0;
    std::vector<std::vector<uint64_t>> blocks;
    content_hash_many({&buffer, 1}, {&whole, 1}, 2, &blocks);
    CHECK(whole == content_hash(data.data(), size));
    REQUIRE(blocks.size() == 1);
    REQUIRE(blocks[0].size() == std::max<size_t>(1, (size + kContentHashBlock - 1) / kContentHashBlock));
    std::vector<uint64_t> rehashed;
    for (size_t begin = 0; begin < size || rehashed.empty(); begin += kContentHashBlock)
      rehashed.push_back(hash_bytes(data.data() + begin, std::min(kContentHashBlock, size - begin)));
    CHECK(rehashed == blocks[0]);
    CHECK(content_hash_from_blocks(rehashed, size) == whole);
  }
}
