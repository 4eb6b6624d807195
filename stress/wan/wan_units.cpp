#include "wan_units.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ferry::wan {
namespace {

[[noreturn]] void bad(std::string_view key, std::string_view value, std::string_view accepts) {
  throw std::invalid_argument("bad " + std::string(key) + "='" + std::string(value) + "' (" + std::string(accepts) +
                              ")");
}

// Splits "12.5ms" into 12.5 and "ms". Returns false when there is no leading number.
bool number_and_unit(std::string_view text, double& number, std::string& unit) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, number);
  if (ec != std::errc() || !std::isfinite(number)) return false;
  unit = lower(std::string_view(ptr, static_cast<size_t>(last - ptr)));
  return true;
}

}  // namespace

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  return out;
}

double parse_duration_ms(std::string_view key, std::string_view v) {
  constexpr std::string_view accepts = "a duration: 50ms, 0.2s, 500us; a bare number is ms";
  double n = 0;
  std::string unit;
  if (!number_and_unit(v, n, unit) || n < 0) bad(key, v, accepts);
  if (unit.empty() || unit == "ms") return n;
  if (unit == "s") return n * 1e3;
  if (unit == "us") return n * 1e-3;
  bad(key, v, accepts);
}

double parse_loss(std::string_view key, std::string_view v) {
  constexpr std::string_view accepts = "a percentage like 0.1% or a fraction in [0,1]";
  double n = 0;
  std::string unit;
  if (!number_and_unit(v, n, unit) || n < 0) bad(key, v, accepts);
  if (unit == "%") n /= 100.0;
  else if (!unit.empty()) bad(key, v, accepts);
  if (n > 1.0) bad(key, v, accepts);
  return n;
}

uint64_t parse_rate_bps(std::string_view key, std::string_view v) {
  constexpr std::string_view accepts = "bit|kbit|mbit|gbit per second, e.g. 200mbit; 0 or none = unshaped";
  const std::string l = lower(v);
  if (l == "none" || l == "unlimited") return 0;
  double n = 0;
  std::string unit;
  if (!number_and_unit(v, n, unit) || n < 0) bad(key, v, accepts);
  double mult = 0;
  if (unit == "bit" || (unit.empty() && n == 0)) mult = 1;
  else if (unit == "kbit") mult = 1e3;
  else if (unit == "mbit") mult = 1e6;
  else if (unit == "gbit") mult = 1e9;
  else bad(key, v, accepts);
  const double bps = n * mult;
  if (bps > 1e12) bad(key, v, accepts);
  return static_cast<uint64_t>(std::llround(bps));
}

uint64_t parse_bytes(std::string_view key, std::string_view v) {
  constexpr std::string_view accepts = "bytes with an optional k or m suffix (KiB, MiB)";
  double n = 0;
  std::string unit;
  if (!number_and_unit(v, n, unit) || n < 0) bad(key, v, accepts);
  double mult = 1;
  if (unit == "k" || unit == "kb" || unit == "kib") mult = 1024;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1024.0 * 1024.0;
  else if (!unit.empty() && unit != "b") bad(key, v, accepts);
  return static_cast<uint64_t>(std::llround(n * mult));
}

uint64_t parse_uint(std::string_view key, std::string_view v) {
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || ptr != v.data() + v.size()) bad(key, v, "a non-negative integer");
  return n;
}

bool parse_bool(std::string_view key, std::string_view v) {
  const std::string l = lower(v);
  if (l == "on" || l == "1" || l == "true" || l == "yes") return true;
  if (l == "off" || l == "0" || l == "false" || l == "no") return false;
  bad(key, v, "on or off");
}

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string format_rate(uint64_t bps) {
  if (bps == 0) return "none";
  if (bps % 1'000'000'000 == 0) return std::to_string(bps / 1'000'000'000) + "gbit";
  if (bps % 1'000'000 == 0) return std::to_string(bps / 1'000'000) + "mbit";
  if (bps % 1'000 == 0) return std::to_string(bps / 1'000) + "kbit";
  return std::to_string(bps) + "bit";
}

}  // namespace ferry::wan
