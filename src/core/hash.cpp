#include "core/hash.h"

#include <xxhash.h>

namespace ferry {

// XXH3-64 is stable across versions and platforms (its output is frozen since
// xxHash 0.8.0), which is what lets peers on different machines compare hashes.
uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace ferry
