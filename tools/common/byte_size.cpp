#include "byte_size.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace ferry::tooling {

std::size_t parse_byte_size(std::string_view text) {
  const std::string shown(text);
  std::uint64_t value = 0;
  const char* const begin = text.data();
  const char* const end = begin + text.size();
  const auto [stop, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc{} || stop == begin) {
    throw std::invalid_argument("bad size '" + shown + "': expected bytes with an optional K, M or G suffix");
  }
  unsigned shift = 0;
  if (stop != end) {
    if (stop + 1 != end) throw std::invalid_argument("bad size '" + shown + "': one suffix letter at most (K, M or G)");
    switch (*stop) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: throw std::invalid_argument("bad size '" + shown + "': unknown suffix (K, M, G are binary: 1M = 1048576)");
    }
  }
  if (value == 0) throw std::invalid_argument("bad size '" + shown + "': must be at least one element");
  if (value > (std::numeric_limits<std::size_t>::max() >> shift)) throw std::invalid_argument("bad size '" + shown + "': too large");
  return static_cast<std::size_t>(value << shift);
}

std::vector<std::size_t> parse_byte_sizes(std::string_view text) {
  std::vector<std::size_t> sizes;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    sizes.push_back(parse_byte_size(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return sizes;
}

std::string format_byte_size(std::size_t bytes) {
  static constexpr const char* kSuffixes[] = {"G", "M", "K"};
  static constexpr unsigned kShifts[] = {30, 20, 10};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::size_t unit = std::size_t{1} << kShifts[i];
    if (bytes >= unit && bytes % unit == 0) return std::to_string(bytes / unit) + kSuffixes[i];
  }
  return std::to_string(bytes);
}

}  // namespace ferry::tooling
