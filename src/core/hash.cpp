#include "core/hash.h"

// Inline, so XXH3 is compiled with this build's flags (AVX2 with -march=native);
// Debian's libxxhash is built for baseline x86-64 and hashes at SSE2 speed.
// The bits are the same either way.
// GCC 12 misreads _mm512_undefined_* inside its own AVX-512 headers as uninitialized use.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define XXH_INLINE_ALL
#include <xxhash.h>
#pragma GCC diagnostic pop

namespace ferry {

// XXH3-64 is stable across versions and platforms (its output is frozen since
// xxHash 0.8.0), which is what lets peers on different machines compare hashes.
uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

}  // namespace ferry
