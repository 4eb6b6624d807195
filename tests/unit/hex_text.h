// Bytes as lowercase hex, for golden-value tests and their failure messages.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

namespace ferry::test {

inline std::string to_hex(std::span<const uint8_t> bytes) {
  std::string out;
  char digits[3];
  for (uint8_t b : bytes) {
    std::snprintf(digits, sizeof digits, "%02x", b);
    out += digits;
  }
  return out;
}

}  // namespace ferry::test
