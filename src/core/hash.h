// Content hashing (XXH3-64): result parity checks, shared-state election, chunk integrity.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry {

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);

}  // namespace ferry
