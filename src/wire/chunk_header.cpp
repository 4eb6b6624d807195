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

}  // namespace

std::array<uint8_t, kChunkHeaderBytes> encode_chunk_header(const ChunkHeader& h) {
  std::array<uint8_t, kChunkHeaderBytes> out{};
  uint8_t* p = out.data();
  put(p, kChunkMagic);
  put(p, h.seq);
  put(p, h.unit);
  put(p, h.length);
  put(p, h.checksum);
  return out;
}

bool decode_chunk_header(const uint8_t* bytes, ChunkHeader& out) {
  const uint8_t* p = bytes;
  if (get<uint32_t>(p) != kChunkMagic) return false;
  out.seq = get<uint32_t>(p);
  out.unit = get<uint32_t>(p);
  out.length = get<uint32_t>(p);
  out.checksum = get<uint64_t>(p);
  return true;
}

}  // namespace ferry::wire
