// libFuzzer target: the quantization decoders (core/quant.h) on arbitrary
// bytes, as a peer's chunk would arrive. No input may make them crash or
// touch memory outside their buffers; a wrong length must be refused
// (Errc::protocol); and whatever decodes must keep the documented contracts:
//  - decode is a pure function of the bytes (two decodes, same bits);
//  - quant_decode_add == decode, then one IEEE addition per element;
//  - quant_decode_add_encode == quant_decode_add, then quant_encode, byte for
//    byte, also when its output aliases its input.
//
// Input: byte 0: codec (mod 5: u8 i8 f16 bf16 u4), bit 3: accumulate in
// double (else float), bit 4: cut the bytes to the exact encoded length;
// u16 block - 1; u16 count (mod 4096); then the encoded bytes.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "core/quant.h"
#include "fuzz_input.h"

using namespace ferry;
using ferry::fuzz::FuzzInput;

namespace {

template <class T>
bool same_bits(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return true;  // which NaN an addition keeps is the CPU's business
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void exercise(QuantSpec spec, size_t count, bool exact_length, FuzzInput& in) {
  size_t expected = quant_encoded_bytes<T>(spec, count);
  auto span = exact_length ? in.bytes(expected) : in.rest();
  std::vector<uint8_t> src(span.begin(), span.end());  // exact size: an overread is an ASan report

  std::vector<T> decoded(count);
  Status st = quant_decode<T>(spec, src.data(), src.size(), count, decoded.data());
  if (src.size() != expected) {
    FERRY_FUZZ_CHECK(!st.ok() && st.code == Errc::protocol, "a chunk of the wrong length was accepted");
    return;
  }
  std::vector<T> local(count);
  for (size_t i = 0; i < count; ++i) local[i] = static_cast<T>(static_cast<double>(i % 13) * 0.25 - 1.0);
  std::vector<T> acc(count);
  Status st_add = quant_decode_add<T>(spec, src.data(), src.size(), local.data(), count, acc.data());
  std::vector<uint8_t> fused(expected);
  Status st_fused = quant_decode_add_encode<T>(spec, src.data(), src.size(), local.data(), count, fused.data());
  FERRY_FUZZ_CHECK(st.ok() == st_add.ok() && st.ok() == st_fused.ok(), "decoders disagree on validity");
  if (!st.ok()) {
    FERRY_FUZZ_CHECK(st.code == Errc::protocol, "a decode failure that is not Errc::protocol");
    return;
  }
  std::vector<T> again(count);
  FERRY_FUZZ_CHECK(quant_decode<T>(spec, src.data(), src.size(), count, again.data()).ok(), "second decode failed");
  FERRY_FUZZ_CHECK(count == 0 || std::memcmp(again.data(), decoded.data(), count * sizeof(T)) == 0,
                   "decode is not deterministic");
  for (size_t i = 0; i < count; ++i)
    FERRY_FUZZ_CHECK(same_bits<T>(acc[i], decoded[i] + local[i]), "decode_add is not decode + local");
  std::vector<uint8_t> reencoded(expected);
  quant_encode<T>(spec, acc.data(), count, reencoded.data());
  FERRY_FUZZ_CHECK(reencoded == fused, "decode_add_encode differs from decode_add then encode");
  std::vector<uint8_t> in_place = src;
  FERRY_FUZZ_CHECK(
      quant_decode_add_encode<T>(spec, in_place.data(), in_place.size(), local.data(), count, in_place.data()).ok(),
      "in-place decode_add_encode failed");
  FERRY_FUZZ_CHECK(in_place == fused, "in-place decode_add_encode differs");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static constexpr Quant kCodecs[] = {Quant::u8, Quant::i8, Quant::f16, Quant::bf16, Quant::u4};
  FuzzInput in(data, size);
  uint8_t flags = in.u8();
  QuantSpec spec;
  spec.kind = kCodecs[flags % 5];
  spec.block = 1u + in.u16();
  size_t count = in.u16() % 4096;
  bool exact_length = flags & 16;
  if (flags & 8)
    exercise<double>(spec, count, exact_length, in);
  else
    exercise<float>(spec, count, exact_length, in);
  return 0;
}
