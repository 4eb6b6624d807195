#include "chaos_data.h"

#include <xxhash.h>

#include "input_pattern.h"  // tools/common

namespace ferry::chaos {

namespace {

int pattern_rank(std::uint64_t id) { return static_cast<int>(id & 0x7fffffff); }

}  // namespace

std::uint64_t op_seed(std::uint64_t seed, std::uint64_t step, std::uint32_t k) {
  const std::uint64_t words[2] = {step, k};
  return XXH3_64bits_withSeed(words, sizeof words, seed);
}

void fill_peer_input(float* out, std::size_t count, std::uint64_t seed, std::uint64_t id) {
  tooling::fill_input(tooling::ElemType::f32, out, count, seed, pattern_rank(id));
}

std::vector<float> reference_sum(std::size_t count, std::uint64_t seed, const std::vector<std::uint64_t>& ring) {
  std::vector<std::int32_t> units(count, 0);
  for (std::uint64_t id : ring)
    for (std::size_t i = 0; i < count; ++i) units[i] += tooling::pattern_units(seed, pattern_rank(id), i);
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(units[i]) / 8.0f;
  return out;
}

std::vector<float> state_content(std::uint64_t seed, std::uint64_t revision) {
  // The k no all-reduce uses (at most 64 run per step), so no op's input equals a state.
  std::vector<float> out(kStateFloats);
  fill_peer_input(out.data(), out.size(), op_seed(seed, revision, ~std::uint32_t{0}), 0);
  return out;
}

std::vector<std::uint8_t> gather_contribution(std::uint64_t seed, std::uint64_t step, std::uint64_t id,
                                              std::size_t max_bytes) {
  const std::uint64_t words[2] = {step, id};
  const std::uint64_t draw = XXH3_64bits_withSeed(words, sizeof words, seed ^ 0x6761746865720000ULL);  // "gather"
  // One in eight is empty and one in eight a single byte: the edges every run should cross.
  const std::size_t bytes = draw % 8 == 0 ? 0 : draw % 8 == 1 ? 1 : (draw >> 3) % (max_bytes + 1);
  std::vector<std::uint8_t> out(bytes);
  for (std::size_t i = 0; i < bytes; i += 8) {
    const std::uint64_t at[2] = {draw, i};
    const std::uint64_t v = XXH3_64bits(at, sizeof at);
    for (std::size_t b = 0; b < 8 && i + b < bytes; ++b) out[i + b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  return out;
}

std::vector<std::uint8_t> reference_gather(std::uint64_t seed, std::uint64_t step, const std::vector<std::uint64_t>& ring,
                                           std::size_t max_bytes) {
  std::vector<std::uint8_t> out;
  for (std::uint64_t id : ring) {
    const auto part = gather_contribution(seed, step, id, max_bytes);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::string result_hash(const void* data, std::size_t bytes) { return tooling::hash_hex(data, bytes); }

double quant_error_bound(ferry_quant quant, std::size_t world) {
  const double span = 8.0 * static_cast<double>(world), hops = static_cast<double>(world);
  switch (quant) {
    case FERRY_QUANT_NONE: return 0;
    case FERRY_QUANT_U8:
    case FERRY_QUANT_I8: return hops * span / 255.0;  // half a step per hop, doubled for slack
    case FERRY_QUANT_U4: return hops * span / 15.0;
    case FERRY_QUANT_F16: return hops * span * 0x1p-10;
    case FERRY_QUANT_BF16: return hops * span * 0x1p-7;
    // N steps of A / L at most (stochastic rounding's bound; nearest has half), A <= span.
    case FERRY_QUANT_I8H:
    case FERRY_QUANT_I8H_SR: return hops * span / 127.0;
    case FERRY_QUANT_I4H:
    case FERRY_QUANT_I4H_SR: return hops * span / 7.0;
  }
  return 0;
}

}  // namespace ferry::chaos
