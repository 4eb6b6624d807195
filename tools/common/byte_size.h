// Byte counts as people write them on command lines: "64K", "16M", "1G" (binary).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::tooling {

// Throws std::invalid_argument (with the offending text) on anything else, zero, or overflow.
std::size_t parse_byte_size(std::string_view text);
// A comma-separated list of parse_byte_size values.
std::vector<std::size_t> parse_byte_sizes(std::string_view text);
// The shortest exact form: 1048576 -> "1M", 1000 -> "1000".
std::string format_byte_size(std::size_t bytes);

}  // namespace ferry::tooling
