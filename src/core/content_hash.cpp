#include "core/content_hash.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "core/hash.h"

namespace ferry {
namespace {

size_t block_count(size_t size) { return std::max<size_t>(1, (size + kContentHashBlock - 1) / kContentHashBlock); }

}  // namespace

uint64_t content_hash_from_blocks(std::span<const uint64_t> block_hashes, size_t size) {
  std::vector<uint64_t> words(block_hashes.begin(), block_hashes.end());
  words.push_back(static_cast<uint64_t>(size));
  return hash_bytes(words.data(), words.size() * sizeof(uint64_t));
}

uint64_t content_hash(const void* data, size_t size) {
  std::pair<const void*, size_t> one{data, size};
  uint64_t out = 0;
  content_hash_many({&one, 1}, {&out, 1}, 1);
  return out;
}

void content_hash_many(std::span<const std::pair<const void*, size_t>> buffers, std::span<uint64_t> out,
                       unsigned threads, std::vector<std::vector<uint64_t>>* block_hashes_out) {
  // Work items: every block of every buffer, claimed from one counter.
  struct Block {
    size_t buffer, index;
  };
  std::vector<Block> blocks;
  std::vector<std::vector<uint64_t>> block_hashes(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    block_hashes[b].resize(block_count(buffers[b].second));
    for (size_t i = 0; i < block_hashes[b].size(); ++i) blocks.push_back({b, i});
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < blocks.size();) {
      auto [b, i] = blocks[k];
      const auto* base = static_cast<const uint8_t*>(buffers[b].first);
      size_t begin = i * kContentHashBlock, len = std::min(kContentHashBlock, buffers[b].second - std::min(begin, buffers[b].second));
      block_hashes[b][i] = hash_bytes(base ? base + begin : nullptr, len);
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  size_t helpers = std::min<size_t>(threads, blocks.size()) - (blocks.empty() ? 0 : 1);
  std::vector<std::thread> pool;
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (size_t b = 0; b < buffers.size(); ++b) out[b] = content_hash_from_blocks(block_hashes[b], buffers[b].second);
  if (block_hashes_out) *block_hashes_out = std::move(block_hashes);
}

}  // namespace ferry
