// The header in front of every all-reduce chunk on a p2p link. Links carry
// raw chunks after link_hello/link_welcome, so this is the whole framing of
// the bulk path: fixed size, no allocation, validated against the receiver's
// own plan of the operation before a payload byte is read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ferry::wire {

inline constexpr size_t kChunkHeaderBytes = 24;
inline constexpr uint32_t kChunkMagic = 0x4b4e4843;  // "CHNK"

struct ChunkHeader {
  uint32_t seq = 0;       // the collective's number within the ring's epoch
  uint32_t unit = 0;      // step * chunks_per_segment + chunk (see peer/ring_plan.h)
  uint32_t length = 0;    // payload bytes that follow
  // XXH3-64 of the payload: corruption is an error, never a result. On the wire
  // it is XORed with a mix of seq, unit and length, so it covers them too.
  uint64_t checksum = 0;
};

std::array<uint8_t, kChunkHeaderBytes> encode_chunk_header(const ChunkHeader& header);
// False when the magic is wrong; field values are the caller's to validate.
bool decode_chunk_header(const uint8_t* bytes, ChunkHeader& out);

}  // namespace ferry::wire
