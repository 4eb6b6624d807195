// A frame header with any field wrong on purpose, for the tests that throw
// malformed traffic at a live master.
#pragma once

#include <cstdint>
#include <vector>

#include "wire/byte_codec.h"

namespace ferry::test {

inline std::vector<uint8_t> forged_frame_header(uint32_t magic, uint16_t version, uint16_t type, uint32_t length) {
  std::vector<uint8_t> out;
  wire::ByteWriter w(out);
  w(magic);
  w(version);
  w(type);
  w(length);
  return out;
}

}  // namespace ferry::test
