// Reading structured values out of a fuzzer's bytes: never fails, never reads
// past the end (an exhausted input reads as zeros), so every byte string is a
// valid program for the targets here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace ferry::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return size_ - pos_; }

  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() { return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32); }

  // Up to n bytes (fewer at the end of the input).
  std::span<const uint8_t> bytes(size_t n) {
    size_t take = n < remaining() ? n : remaining();
    std::span<const uint8_t> out(data_ + pos_, take);
    pos_ += take;
    return out;
  }
  std::span<const uint8_t> rest() { return bytes(remaining()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A broken invariant: say which, then crash so libFuzzer keeps the input.
[[noreturn]] inline void invariant_failed(const std::string& what) {
  std::fprintf(stderr, "ferry fuzz: invariant broken: %s\n", what.c_str());
  std::abort();
}

#define FERRY_FUZZ_CHECK(condition, what) \
  do {                                    \
    if (!(condition)) ::ferry::fuzz::invariant_failed(what); \
  } while (0)

}  // namespace ferry::fuzz
