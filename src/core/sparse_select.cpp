// Chunk-wise top-k selection of the sparse codec (sparse_codec.h, Selection).
//
// The order is fixed by the header: larger magnitude bits first, then the
// lower index. Any algorithm that returns the first k of that order returns
// the same set, so this file may change its method without changing a byte.
//
// Method, per chunk of n elements (mag = |x|'s f32 bits, k_c = min(k, n)):
//  1. a 256-bin histogram of the exponent byte (mag >> 23), in four
//     interleaved copies so that runs of one bin (common: most of a gradient
//     shares a few exponents) do not serialise on one counter;
//  2. from the top bin down, the bin b where the count reaches k_c: every
//     element above b is in, b holds the threshold;
//  3. one branch-free pass that lists the indices at or above bin b (in
//     ascending order), typically 2-3 k_c of them;
//  4. nth_element over the magnitudes of bin b only gives the exact k_c-th
//     key T and how many of the elements equal to T are in (the lowest
//     indices first); a last pass over the short list writes the result.
// Measured on the dev machine (2-core Xeon, AVX-512, shared with other
// builds), 64 MiB of normal(0, 1) f32, chunk 4096, 2 %: this select 1.93 GB/s
// of f32, the whole-chunk std::nth_element baseline 0.41 (ferry_core_bench
// sparse_select/*); encoding in all 1.5-2.1 GB/s at load ~3, 1.0-1.2 at ~7.
// Worst case: a chunk whose elements share one exponent (e.g. all equal)
// makes step 4 an nth_element over the whole chunk: O(n), a few times slower.
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "core/sparse_codec.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace ferry::sparse_detail {

namespace {

// Indices i with mag[i] >= floor, in ascending order, into list; returns how many.
uint32_t list_at_or_above(const uint32_t* mag, uint32_t n, uint32_t floor, uint32_t* list) {
  uint32_t count = 0;
  uint32_t i = 0;
#if defined(__AVX512F__)
  // Compress-store: ~8x the scalar loop, which is the encoder's second pass.
  const __m512i threshold = _mm512_set1_epi32(static_cast<int>(floor));
  __m512i index = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i sixteen = _mm512_set1_epi32(16);
  for (; i + 16 <= n; i += 16) {
    const __m512i m = _mm512_loadu_si512(mag + i);
    const __mmask16 keep = _mm512_cmpge_epu32_mask(m, threshold);
    _mm512_mask_compressstoreu_epi32(list + count, keep, index);
    count += static_cast<uint32_t>(__builtin_popcount(keep));
    index = _mm512_add_epi32(index, sixteen);
  }
#endif
  for (; i < n; ++i) {
    list[count] = i;
    count += mag[i] >= floor ? 1u : 0u;
  }
  return count;
}

}  // namespace

uint32_t select_top_k(const uint32_t* mag, uint32_t n, uint32_t k, uint32_t* scratch, uint32_t* selected) {
  const uint32_t take = std::min(k, n);
  if (take == n) {
    std::iota(selected, selected + n, 0u);
    return n;
  }
  uint32_t hist[4][256] = {};
  uint32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++hist[0][mag[i] >> 23];
    ++hist[1][mag[i + 1] >> 23];
    ++hist[2][mag[i + 2] >> 23];
    ++hist[3][mag[i + 3] >> 23];
  }
  for (; i < n; ++i) ++hist[0][mag[i] >> 23];

  uint32_t above = 0;  // elements in bins above `bin`
  uint32_t bin = 255;
  uint32_t in_bin = 0;
  for (;; --bin) {
    in_bin = hist[0][bin] + hist[1][bin] + hist[2][bin] + hist[3][bin];
    if (above + in_bin >= take) break;
    above += in_bin;
  }
  uint32_t* list = scratch;  // n entries at most
  const uint32_t listed = list_at_or_above(mag, n, bin << 23, list);
  const uint32_t need = take - above;  // from the threshold bin, 1..in_bin
  if (need == in_bin) {
    std::memcpy(selected, list, listed * sizeof(uint32_t));
    return take;
  }
  // The threshold bin's magnitudes (scratch's second half), and the need-th largest.
  uint32_t* keys = scratch + n;
  const uint32_t bin_top = (bin + 1) << 23;  // 2^31 for bin 255: still a u32
  uint32_t candidates = 0;
  for (uint32_t j = 0; j < listed; ++j) {
    const uint32_t m = mag[list[j]];
    keys[candidates] = m;
    candidates += m < bin_top ? 1u : 0u;
  }
  std::nth_element(keys, keys + (need - 1), keys + candidates, std::greater<uint32_t>());
  const uint32_t threshold = keys[need - 1];
  uint32_t greater = 0;
  for (uint32_t j = 0; j < need - 1; ++j) greater += keys[j] > threshold ? 1u : 0u;
  uint32_t ties = need - greater;  // elements equal to the threshold to take, lowest index first

  uint32_t out = 0;
  for (uint32_t j = 0; j < listed && out < take; ++j) {  // out < take: selected holds k entries
    const uint32_t m = mag[list[j]];
    const bool equal = m == threshold;
    const bool in = m > threshold || (equal && ties != 0);
    ties -= (equal && in) ? 1u : 0u;
    selected[out] = list[j];
    out += in ? 1u : 0u;
  }
  return out;
}

uint32_t select_reference(const uint32_t* mag, uint32_t n, uint32_t k, uint32_t* selected) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [mag](uint32_t a, uint32_t b) { return mag[a] > mag[b]; });
  const uint32_t take = std::min(k, n);
  order.resize(take);
  std::sort(order.begin(), order.end());
  std::copy(order.begin(), order.end(), selected);
  return take;
}

}  // namespace ferry::sparse_detail
