// Little-endian field codec with hard bounds. ByteWriter appends; ByteReader
// consumes and fails (sticky, never throws, never reads past the end) on the
// first short read or limit breach, so a decoder can be fed any bytes at all.
//
// Messages describe their fields once, in a `fields(V&)` member; the same
// function drives encoding (V = ByteWriter) and decoding (V = ByteReader).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace ferry::wire {

// The most elements a vector field may declare, and the longest string; for a
// vector of strings, `element` is the longest of each.
struct Limit {
  size_t max;
  size_t element = 0;
};

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}

  template <class T>
    requires std::is_integral_v<T>
  void operator()(const T& value) {
    auto v = static_cast<std::make_unsigned_t<T>>(value);
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void operator()(const std::string& s, Limit) {
    (*this)(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  template <class T>
  void operator()(const std::vector<T>& items, Limit) {
    (*this)(static_cast<uint32_t>(items.size()));
    for (const T& item : items) {
      if constexpr (std::is_integral_v<T>)
        (*this)(item);
      else if constexpr (std::is_same_v<T, std::string>)
        (*this)(item, Limit{0});
      else
        const_cast<T&>(item).fields(*this);  // fields() only reads here
    }
  }

 private:
  std::vector<uint8_t>& out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> data) : data_(data) {}

  template <class T>
    requires std::is_integral_v<T>
  void operator()(T& value) {
    value = 0;
    if (!take(sizeof(T), "integer")) return;
    std::make_unsigned_t<T> v = 0;
    for (size_t i = 0; i < sizeof(T); ++i)
      v = static_cast<decltype(v)>(v | (static_cast<decltype(v)>(data_[pos_ - sizeof(T) + i]) << (8 * i)));
    value = static_cast<T>(v);
  }
  void operator()(std::string& s, Limit limit);
  template <class T>
  void operator()(std::vector<T>& items, Limit limit) {
    uint32_t n = 0;
    (*this)(n);
    // Every element takes at least one byte (an integer, sizeof(T); a string, its length): a count beyond the
    // bytes left is a lie.
    size_t min_bytes = std::is_integral_v<T> ? sizeof(T) : std::is_same_v<T, std::string> ? sizeof(uint32_t) : 1;
    if (ok_ && (n > limit.max || n > remaining() / min_bytes)) {
      fail("vector of " + std::to_string(n) + " elements exceeds its limit");
      return;
    }
    items.clear();
    items.resize(n);
    for (T& item : items) {
      if (!ok_) return;
      if constexpr (std::is_integral_v<T>)
        (*this)(item);
      else if constexpr (std::is_same_v<T, std::string>)
        (*this)(item, Limit{limit.element});
      else
        item.fields(*this);
    }
  }

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  size_t remaining() const { return data_.size() - pos_; }
  // After the last field: trailing bytes mean the sender disagrees about the layout.
  void expect_end();
  void fail(const std::string& message);

 private:
  bool take(size_t n, const char* what);

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  bool ok_ = true;
  std::string error_;
};

}  // namespace ferry::wire
