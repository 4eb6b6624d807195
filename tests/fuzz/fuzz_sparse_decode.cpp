// libFuzzer target: the sparse codec's decoder (core/sparse_codec.h) on
// arbitrary bytes, as a peer's contribution would arrive, and its encoder on
// arbitrary floats. No input may make them crash or touch memory outside
// their buffers; what is refused is refused with Errc::protocol; and:
//  - sparse_validate, sparse_decode_add and sparse_decode_sum accept the same
//    contributions;
//  - decoding is a pure function of the bytes, and decode_sum of (a, b) is
//    decode_add of a then of b, from zeros, bit for bit;
//  - a contribution one byte short is refused;
//  - every encoding validates, its residual is x minus its decoding, and the
//    fast selection chooses what the reference sort chooses.
//
// Input: byte 0: bit 0 encoder mode (else decoder mode).
//  decoder mode: the rest is the contribution (decoded only when its count
//    is at most 2^16, so that the fuzzer cannot make the driver allocate).
//  encoder mode: u16 chunk - 1 (mod 4096), u16 k - 1 (mod chunk), u8 bits
//    selector (2, 4, 8), then f32 values (at most 8192).
#include <algorithm>
#include <bit>
#include <cstring>
#include <span>
#include <vector>

#include "core/sparse_codec.h"
#include "fuzz_input.h"

using namespace ferry;
using ferry::fuzz::FuzzInput;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void decoder(std::span<const uint8_t> span) {
  const std::vector<uint8_t> bytes(span.begin(), span.end());  // exact size: an overread is an ASan report
  SparseHeader h;
  const Status st = sparse_validate(bytes.data(), bytes.size(), &h);
  if (!st.ok()) FERRY_FUZZ_CHECK(st.code == Errc::protocol, "a refusal that is not Errc::protocol");
  SparseHeader read;
  const Status header = sparse_read_header(bytes.data(), bytes.size(), &read);
  if (!header.ok()) {
    FERRY_FUZZ_CHECK(!st.ok(), "validate accepted what read_header refused");
    return;
  }
  if (read.count > (uint64_t{1} << 16)) return;
  const auto count = static_cast<size_t>(read.count);
  std::vector<float> added(count, 0.0f);
  const Status st_add = sparse_decode_add(bytes.data(), bytes.size(), added.data(), count);
  FERRY_FUZZ_CHECK(st.ok() == st_add.ok(), "validate and decode_add disagree");
  const std::span<const uint8_t> twice[2] = {bytes, bytes};
  std::vector<float> summed(count, 42.0f);
  const Status st_sum = sparse_decode_sum(twice, summed.data(), count);
  FERRY_FUZZ_CHECK(st.ok() == st_sum.ok(), "validate and decode_sum disagree");
  if (!st.ok()) {
    FERRY_FUZZ_CHECK(std::all_of(summed.begin(), summed.end(), [](float v) { return v == 42.0f; }),
                     "a refused decode_sum wrote its output");
    return;
  }
  std::vector<float> stepwise(count, 0.0f);
  FERRY_FUZZ_CHECK(sparse_decode_add(bytes.data(), bytes.size(), stepwise.data(), count).ok(), "second decode");
  FERRY_FUZZ_CHECK(same_bits(stepwise, added), "decode is not deterministic");
  FERRY_FUZZ_CHECK(sparse_decode_add(bytes.data(), bytes.size(), stepwise.data(), count).ok(), "third decode");
  FERRY_FUZZ_CHECK(same_bits(stepwise, summed), "decode_sum is not decode_add in rank order");
  FERRY_FUZZ_CHECK(!sparse_validate(bytes.data(), bytes.size() - 1, nullptr).ok(), "a short contribution passed");
}

void encoder(FuzzInput& in) {
  SparseSpec spec;
  spec.chunk = 1u + in.u16() % 4096u;
  spec.k = 1u + in.u16() % spec.chunk;
  const uint8_t bits[3] = {2, 4, 8};
  spec.bits = bits[in.u8() % 3];
  const size_t count = std::min<size_t>(in.remaining() / 4, 8192);
  std::vector<float> x(count);
  for (float& v : x) v = std::bit_cast<float>(in.u32());
  std::vector<uint8_t> wire(sparse_max_encoded_bytes(spec, count));
  std::vector<float> residual(count);
  wire.resize(sparse_encode(spec, DType::f32, x.data(), count, wire.data(), residual.data()));
  std::vector<float> decoded(count, 0.0f);
  const Status st = sparse_decode_add(wire.data(), wire.size(), decoded.data(), count);
  FERRY_FUZZ_CHECK(st.ok(), "an encoding does not decode: " + st.message);
  for (size_t i = 0; i < count; ++i) {
    const float expected = x[i] - decoded[i];
    FERRY_FUZZ_CHECK(std::bit_cast<uint32_t>(expected) == std::bit_cast<uint32_t>(residual[i]) ||
                         (expected != expected && residual[i] != residual[i]),
                     "residual is not x minus its decoding");
  }
  std::vector<uint32_t> mag(spec.chunk), scratch(2 * size_t{spec.chunk}), fast(spec.k), slow(spec.k);
  for (size_t first = 0; first < count; first += spec.chunk) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(spec.chunk, count - first));
    for (uint32_t i = 0; i < n; ++i) mag[i] = std::bit_cast<uint32_t>(x[first + i]) & 0x7fffffffu;
    const uint32_t a = sparse_detail::select_top_k(mag.data(), n, spec.k, scratch.data(), fast.data());
    const uint32_t b = sparse_detail::select_reference(mag.data(), n, spec.k, slow.data());
    FERRY_FUZZ_CHECK(a == b && std::equal(fast.begin(), fast.begin() + a, slow.begin()),
                     "the fast selection differs from the reference");
  }
}

}  // namespace

// The codec logs nothing, so no LLVMFuzzerInitialize quiets a logger here.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> body(data + 1, size - 1);
  if ((data[0] & 1) != 0) {
    FuzzInput in(body.data(), body.size());
    encoder(in);
  } else {
    decoder(body);
  }
  return 0;
}
