// Pieces of the sparse codec's format (sparse_codec.h, Byte layout) that the
// encoder and the decoder share: the bit fields (little-endian bit streams of
// fixed-width values, 0..16 bits, padded with zero bits to a whole byte), the
// value levels and the one definition of a code's value. Internal to core/.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace ferry::sparse_detail {

// Bytes of a field of count values of width bits.
constexpr size_t field_bytes(uint64_t count, uint32_t width) { return static_cast<size_t>((count * width + 7) / 8); }

// ceil(log2 chunk): the index width (0 for a chunk of one element).
constexpr uint32_t index_width(uint32_t chunk) {
  uint32_t w = 0;
  while ((uint64_t{1} << w) < chunk) ++w;
  return w;
}

// The non-finite chunk's lo and step.
inline constexpr uint32_t kNanBits = 0x7fc00000u;

// L = 2^(b-1) - 1: the largest magnitude code.
constexpr uint32_t levels(uint32_t bits) { return (uint32_t{1} << (bits - 1)) - 1; }

// v = lo + f32(m) * step, negated when the sign bit is set (two roundings:
// the build has -ffp-contract=off, so no FMA).
inline float code_value(uint32_t code, uint32_t bits, float lo, float step) {
  const uint32_t m = code & levels(bits);
  const float magnitude = lo + static_cast<float>(m) * step;
  return (code >> (bits - 1)) != 0 ? -magnitude : magnitude;
}

class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  // value < 2^width, width <= 16.
  void put(uint32_t value, uint32_t width) {
    acc_ |= static_cast<uint64_t>(value) << pending_;
    pending_ += width;
    while (pending_ >= 8) {
      *out_++ = static_cast<uint8_t>(acc_);
      acc_ >>= 8;
      pending_ -= 8;
    }
  }
  // Writes the last partial byte (zero-padded); returns the end of the field.
  uint8_t* finish() {
    if (pending_ != 0) *out_++ = static_cast<uint8_t>(acc_);
    acc_ = 0;
    pending_ = 0;
    return out_;
  }

 private:
  uint8_t* out_;
  uint64_t acc_ = 0;
  uint32_t pending_ = 0;
};

// Reads a field whose length the caller has checked: it reads exactly
// field_bytes(count, width) bytes when count values are taken.
class BitReader {
 public:
  explicit BitReader(const uint8_t* in) : in_(in) {}
  uint32_t get(uint32_t width) {
    while (pending_ < width) {
      acc_ |= static_cast<uint64_t>(*in_++) << pending_;
      pending_ += 8;
    }
    const auto value = static_cast<uint32_t>(acc_ & ((uint64_t{1} << width) - 1));
    acc_ >>= width;
    pending_ -= width;
    return value;
  }
  // After the last value: true when the padding bits were zero.
  bool padding_zero() const { return acc_ == 0; }
  const uint8_t* position() const { return in_; }

 private:
  const uint8_t* in_;
  uint64_t acc_ = 0;
  uint32_t pending_ = 0;
};

}  // namespace ferry::sparse_detail
