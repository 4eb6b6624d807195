// Pieces of the sparse codec's format (sparse_codec.h, Byte layout) that the
// encoder and the decoder share: the bit fields (little-endian bit streams,
// padded with zero bits to a whole byte), the Rice code of the index gaps and
// its size bounds, the value levels and the one definition of a code's value.
// Internal to core/.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace ferry::sparse_detail {

// Bytes of a field of `bits` bits.
constexpr uint64_t field_bytes(uint64_t bits) { return (bits + 7) / 8; }

// The Rice parameter of a spec: r = floor(log2(chunk / k)), 0..16.
constexpr uint32_t rice_parameter(uint32_t chunk, uint32_t k) {
  return 31u - static_cast<uint32_t>(std::countl_zero(chunk / k));
}

// Bounds of a chunk's index field, in bits, for `sent` indices among n with
// parameter r: each gap costs its quotient in ones, a zero and r low bits,
// and the gaps sum to at most n - sent, so their quotients to at most
// (n - sent) >> r.
constexpr uint64_t index_bits_min(uint64_t sent, uint32_t r) { return sent * (r + 1); }
constexpr uint64_t index_bits_max(uint64_t n, uint64_t sent, uint32_t r) {
  return sent * (r + 1) + ((n - sent) >> r);
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
  // The Rice code of gap: gap >> r ones, a zero, then gap's r low bits.
  void put_rice(uint32_t gap, uint32_t r) {
    uint32_t q = gap >> r;
    for (; q >= 16; q -= 16) put(0xffffu, 16);
    put((1u << q) - 1u, q + 1);  // q ones, then the zero
    put(gap & ((1u << r) - 1u), r);
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

// Reads a field within [in, end): a read past end sets overrun() and gives 0.
class BitReader {
 public:
  BitReader(const uint8_t* in, const uint8_t* end) : in_(in), end_(end) {}
  uint32_t get(uint32_t width) {
    while (pending_ < width) {
      if (in_ == end_) {
        overrun_ = true;
        return 0;
      }
      acc_ |= static_cast<uint64_t>(*in_++) << pending_;
      pending_ += 8;
    }
    const auto value = static_cast<uint32_t>(acc_ & ((uint64_t{1} << width) - 1));
    acc_ >>= width;
    pending_ -= width;
    return value;
  }
  // A Rice-coded gap into *gap; false when its quotient exceeds max_quotient
  // or the field ends first. The unary run is counted a word at a time (bit by
  // bit measured 1.6x slower a decode_sum), so the reader loads up to 8 bytes
  // ahead (never past end), which position() and padding_zero() account for.
  bool get_rice(uint32_t r, uint32_t max_quotient, uint32_t* gap) {
    uint32_t q = 0;
    for (;;) {
      while (pending_ <= 56 && in_ != end_) {
        acc_ |= static_cast<uint64_t>(*in_++) << pending_;
        pending_ += 8;
      }
      // acc_ holds exactly pending_ bits (those above are zero), so the run stops inside them
      // unless every one of the 64 is a one.
      const auto ones = static_cast<uint32_t>(std::countr_one(acc_));
      if (ones < pending_) {
        q += ones;
        if (q > max_quotient) return false;
        acc_ = ones + 1 == 64 ? 0 : acc_ >> (ones + 1);
        pending_ -= ones + 1;
        break;
      }
      q += pending_;
      acc_ = 0;
      pending_ = 0;
      if (q > max_quotient) return false;
      if (in_ == end_) {
        overrun_ = true;
        return false;
      }
    }
    const uint32_t low = get(r);
    if (overrun_) return false;
    *gap = q << r | low;
    return true;
  }
  bool overrun() const { return overrun_; }
  // After the last value: true when the padding bits (the rest of the byte
  // last read from) were zero. The whole bytes loaded ahead are not padding.
  bool padding_zero() const { return (acc_ & ((uint64_t{1} << (pending_ % 8)) - 1)) == 0; }
  // The first byte not read from (bytes loaded ahead and unused do not count).
  const uint8_t* position() const { return in_ - pending_ / 8; }

 private:
  const uint8_t* in_;
  const uint8_t* end_;
  uint64_t acc_ = 0;
  uint32_t pending_ = 0;
  bool overrun_ = false;
};

}  // namespace ferry::sparse_detail
