#include "wire/fetch_frames.h"

#include <algorithm>
#include <vector>

#include "wire/byte_codec.h"

namespace ferry::wire {
namespace {

constexpr uint32_t kRequestMagic = 0x51455246;   // "FREQ"
constexpr uint32_t kResponseMagic = 0x50535246;  // "FRSP"

template <size_t N, class F>
std::array<uint8_t, N> encode(F&& fill) {
  std::vector<uint8_t> bytes;
  ByteWriter w(bytes);
  fill(w);
  std::array<uint8_t, N> out{};
  std::copy_n(bytes.begin(), N, out.begin());
  return out;
}

}  // namespace

std::array<uint8_t, kFetchRequestBytes> encode_fetch_request(const FetchRequest& r) {
  return encode<kFetchRequestBytes>([&](ByteWriter& w) {
    w(kRequestMagic); w(r.tensor); w(r.offset); w(r.length); w(r.compression);
  });
}

bool decode_fetch_request(const uint8_t* bytes, FetchRequest& out) {
  ByteReader r({bytes, kFetchRequestBytes});
  uint32_t magic = 0;
  r(magic); r(out.tensor); r(out.offset); r(out.length); r(out.compression);
  return r.ok() && magic == kRequestMagic;
}

std::array<uint8_t, kFetchResponseBytes> encode_fetch_response(const FetchResponse& r) {
  return encode<kFetchResponseBytes>([&](ByteWriter& w) {
    w(kResponseMagic); w(r.tensor); w(r.offset); w(r.raw_length); w(r.wire_length); w(r.compressed); w(r.checksum);
    w(uint32_t{0});  // reserved
  });
}

bool decode_fetch_response(const uint8_t* bytes, FetchResponse& out) {
  ByteReader r({bytes, kFetchResponseBytes});
  uint32_t magic = 0, reserved = 0;
  r(magic); r(out.tensor); r(out.offset); r(out.raw_length); r(out.wire_length); r(out.compressed); r(out.checksum);
  r(reserved);
  return r.ok() && magic == kResponseMagic;
}

}  // namespace ferry::wire
