// libFuzzer target: the integer-domain quantization readers (core/int_quant.h)
// on arbitrary bytes, as a peer's partial and the agreed scales would arrive.
// No input may make them crash or touch memory outside their buffers; a wrong
// length or an out-of-range value must be refused (Errc::protocol); and what
// is accepted must keep the documented contracts:
//  - decode is a pure function of the bytes and the scales (two decodes, same bits);
//  - int_quant_add accepts exactly the partials decode accepts;
//  - int_quant_encode_add == int_quant_encode, then int_quant_add, byte for byte.
//
// Input: byte 0: bit 0 i4h (else i8h), bit 1 double (else float), bit 2 cut
// the bytes to the exact packed length, bit 3 stochastic rounding, bit 4 avg;
// u16 block - 1; u16 count (mod 2048); u16 contributors - 1 (below the
// largest group, so that one more may be added); then one T a block of the
// agreed absmax (as bits), then the packed partial.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/int_quant.h"
#include "core/log.h"
#include "fuzz_input.h"

using namespace ferry;
using ferry::fuzz::FuzzInput;

namespace {

template <class T>
void exercise(IntQuantSpec spec, size_t count, uint32_t k, ReduceOp op, bool exact_length, FuzzInput& in) {
  std::vector<T> absmax(int_quant_block_count(spec, count));
  for (T& a : absmax) {
    if constexpr (sizeof(T) == 4) {
      a = std::bit_cast<T>(in.u32());
    } else {
      a = std::bit_cast<T>(in.u64());
    }
  }
  const size_t expected = int_quant_packed_bytes(spec, count, k);
  auto span = exact_length ? in.bytes(expected) : in.rest();
  std::vector<uint8_t> partial(span.begin(), span.end());  // exact size: an overread is an ASan report

  std::vector<T> decoded(count);
  const Status st =
      int_quant_decode<T>(spec, absmax.data(), 0, partial.data(), partial.size(), k, op, count, decoded.data());
  if (partial.size() != expected) {
    FERRY_FUZZ_CHECK(!st.ok() && st.code == Errc::protocol, "a partial of the wrong length was accepted");
    return;
  }
  std::vector<T> local(count);
  for (size_t i = 0; i < count; ++i) local[i] = static_cast<T>(static_cast<double>(i % 13) * 0.25 - 1.0);
  std::vector<uint8_t> mine(int_quant_packed_bytes(spec, count, 1));
  int_quant_encode<T>(spec, 7, absmax.data(), 0, local.data(), count, mine.data());
  std::vector<uint8_t> separate(int_quant_packed_bytes(spec, count, k + 1));
  const Status st_add =
      int_quant_add(spec, partial.data(), partial.size(), k, mine.data(), mine.size(), 1, count, separate.data());
  std::vector<uint8_t> fused(separate.size());
  const Status st_fused = int_quant_encode_add<T>(spec, 7, absmax.data(), 0, local.data(), count, partial.data(),
                                                  partial.size(), k, fused.data());
  FERRY_FUZZ_CHECK(st.ok() == st_add.ok() && st.ok() == st_fused.ok(), "readers disagree on validity");
  if (!st.ok()) {
    FERRY_FUZZ_CHECK(st.code == Errc::protocol, "a decode failure that is not Errc::protocol");
    return;
  }
  std::vector<T> again(count);
  FERRY_FUZZ_CHECK(
      int_quant_decode<T>(spec, absmax.data(), 0, partial.data(), partial.size(), k, op, count, again.data()).ok(),
      "second decode failed");
  FERRY_FUZZ_CHECK(count == 0 || std::memcmp(again.data(), decoded.data(), count * sizeof(T)) == 0,
                   "decode is not deterministic");
  FERRY_FUZZ_CHECK(fused == separate, "encode_add differs from encode then add");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  IntQuantSpec spec;
  spec.kind = flags & 1 ? IntQuantKind::i4h : IntQuantKind::i8h;
  spec.rounding = flags & 8 ? IntRounding::stochastic : IntRounding::nearest;
  spec.seed = 3;
  spec.block = 1u + in.u16();
  const size_t count = in.u16() % 2048;
  const uint32_t k = 1u + in.u16() % (kMaxIntQuantGroup - 1);
  const ReduceOp op = flags & 16 ? ReduceOp::avg : ReduceOp::sum;
  if (flags & 2) {
    exercise<double>(spec, count, k, op, flags & 4, in);
  } else {
    exercise<float>(spec, count, k, op, flags & 4, in);
  }
  return 0;
}
