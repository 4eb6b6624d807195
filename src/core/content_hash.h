// The identity of a tensor's bytes for shared-state elections: a tree hash,
// XXH3-64 over the XXH3-64 of each 4 MiB block (and the length), so a large
// tensor is hashed by all cores at once yet every machine computes the same
// value. Stable: peers of different builds compare these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ferry {

inline constexpr size_t kContentHashBlock = 4u << 20;

uint64_t content_hash(const void* data, size_t size);

// Hashes many buffers with up to `threads` threads (0: hardware concurrency).
// With `block_hashes`, also returns each buffer's block hashes (XXH3-64 of
// every kContentHashBlock block, in order; one block for an empty buffer).
void content_hash_many(std::span<const std::pair<const void*, size_t>> buffers, std::span<uint64_t> out,
                       unsigned threads = 0, std::vector<std::vector<uint64_t>>* block_hashes = nullptr);

// The content hash of `size` bytes whose block hashes are known (so a
// fetched tensor verified block by block needs no second pass over its bytes).
uint64_t content_hash_from_blocks(std::span<const uint64_t> block_hashes, size_t size);

}  // namespace ferry
