#include "wire/chunk_header.h"

#include <cstring>

namespace ferry::wire {
namespace {

template <class T>
void put(uint8_t*& p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<uint8_t>(v >> (8 * i));
}

template <class T>
T get(const uint8_t*& p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v = static_cast<T>(v | (static_cast<T>(*p++) << (8 * i)));
  return v;
}

// The header's own fields, folded into the checksum on the wire: a flipped bit
// in seq, unit or length then fails the payload's checksum like a flipped
// payload bit, instead of steering an intact payload into another collective or
// unit. For fixed length it is a bijection of (seq, unit), and for fixed
// (seq, unit) one of length, so a change to any one field always changes it.
uint64_t header_tag(uint32_t seq, uint32_t unit, uint32_t length) {
  uint64_t x = ((uint64_t{seq} << 32) | unit) * 0x9E3779B97F4A7C15ULL;
  x ^= uint64_t{length} * 0xC2B2AE3D27D4EB4FULL;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 32);
}

}  // namespace

std::array<uint8_t, kChunkHeaderBytes> encode_chunk_header(const ChunkHeader& h) {
  std::array<uint8_t, kChunkHeaderBytes> out{};
  uint8_t* p = out.data();
  put(p, kChunkMagic);
  put(p, h.seq);
  put(p, h.unit);
  put(p, h.length);
  put(p, h.checksum ^ header_tag(h.seq, h.unit, h.length));
  return out;
}

bool decode_chunk_header(const uint8_t* bytes, ChunkHeader& out) {
  const uint8_t* p = bytes;
  if (get<uint32_t>(p) != kChunkMagic) return false;
  out.seq = get<uint32_t>(p);
  out.unit = get<uint32_t>(p);
  out.length = get<uint32_t>(p);
  out.checksum = get<uint64_t>(p) ^ header_tag(out.seq, out.unit, out.length);
  return true;
}

}  // namespace ferry::wire
