#include "wire/byte_codec.h"

namespace ferry::wire {

void ByteReader::operator()(std::string& s, Limit limit) {
  uint32_t n = 0;
  (*this)(n);
  if (!ok_) return;
  if (n > limit.max) {
    fail("string of " + std::to_string(n) + " bytes exceeds its limit of " +
         std::to_string(limit.max));
    return;
  }
  if (!take(n, "string")) return;
  s.assign(reinterpret_cast<const char*>(data_.data() + pos_ - n), n);
}

void ByteReader::expect_end() {
  if (ok_ && pos_ != data_.size())
    fail(std::to_string(data_.size() - pos_) + " unexpected trailing bytes");
}

void ByteReader::fail(const std::string& message) {
  if (!ok_) return;  // keep the first error: it is the cause
  ok_ = false;
  error_ = message;
}

bool ByteReader::take(size_t n, const char* what) {
  if (!ok_) return false;
  if (n > remaining()) {
    fail(std::string("truncated ") + what + ": needs " + std::to_string(n) + " bytes, " +
         std::to_string(remaining()) + " left");
    return false;
  }
  pos_ += n;
  return true;
}

}  // namespace ferry::wire
