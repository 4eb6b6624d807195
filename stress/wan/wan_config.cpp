#include "wan_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace ferry::wan {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>((c >= 'A' && c <= 'Z') ? c - 'A' + 'a' : c);
  return out;
}

[[noreturn]] void bad(std::string_view key, std::string_view value, std::string_view accepts) {
  throw std::invalid_argument("wan spec: bad " + std::string(key) + "='" + std::string(value) +
                              "' (" + std::string(accepts) + ")");
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

double parse_rtt_ms(std::string_view v) {
  constexpr std::string_view accepts = "a duration: 50ms, 0.2s, 500us; a bare number is ms";
  double n = 0;
  std::string unit;
  if (!number_and_unit(v, n, unit) || n < 0) bad("rtt", v, accepts);
  if (unit.empty() || unit == "ms") return n;
  if (unit == "s") return n * 1e3;
  if (unit == "us") return n * 1e-3;
  bad("rtt", v, accepts);
}

double parse_loss(std::string_view v) {
  constexpr std::string_view accepts = "a percentage like 0.1% or a fraction in [0,1]";
  double n = 0;
  std::string unit;
  if (!number_and_unit(v, n, unit) || n < 0) bad("loss", v, accepts);
  if (unit == "%") n /= 100.0;
  else if (!unit.empty()) bad("loss", v, accepts);
  if (n > 1.0) bad("loss", v, accepts);
  return n;
}

uint64_t parse_rate_bps(std::string_view v) {
  constexpr std::string_view accepts = "bit|kbit|mbit|gbit per second, e.g. 200mbit; 0 or none = unshaped";
  const std::string l = lower(v);
  if (l == "none" || l == "unlimited") return 0;
  double n = 0;
  std::string unit;
  if (!number_and_unit(v, n, unit) || n < 0) bad("rate", v, accepts);
  double mult = 0;
  if (unit == "bit" || (unit.empty() && n == 0)) mult = 1;
  else if (unit == "kbit") mult = 1e3;
  else if (unit == "mbit") mult = 1e6;
  else if (unit == "gbit") mult = 1e9;
  else bad("rate", v, accepts);
  const double bps = n * mult;
  if (bps > 1e12) bad("rate", v, accepts);
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

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

WanConfig WanConfig::parse(std::string_view spec) {
  WanConfig c;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("wan spec: '" + item + "' is not key=value (keys: hosts rtt loss rate cc seed burst limit gso)");
    const std::string key = lower(trim(std::string_view(item).substr(0, eq)));
    const std::string value = trim(std::string_view(item).substr(eq + 1));
    if (key == "rtt") c.rtt_ms = parse_rtt_ms(value);
    else if (key == "loss") c.loss = parse_loss(value);
    else if (key == "rate") c.rate_bps = parse_rate_bps(value);
    else if (key == "cc") c.cc = lower(value);
    else if (key == "seed") c.seed = parse_uint(key, value);
    else if (key == "hosts") c.hosts = static_cast<int>(std::min<uint64_t>(parse_uint(key, value), 100000));
    else if (key == "burst") c.burst_bytes = parse_bytes(key, value);
    else if (key == "limit") c.limit_bytes = parse_bytes(key, value);
    else if (key == "gso") c.gso = parse_bool(key, value);
    else throw std::invalid_argument("wan spec: unknown key '" + key + "' (keys: hosts rtt loss rate cc seed burst limit gso)");
  }
  c.validate();
  return c;
}

void WanConfig::validate() const {
  if (hosts < 1 || hosts > 254) throw std::invalid_argument("wan: hosts must be 1..254 (one /24), got " + std::to_string(hosts));
  if (!(rtt_ms >= 0 && rtt_ms <= 60'000)) throw std::invalid_argument("wan: rtt must be 0..60s");
  if (!(loss >= 0 && loss <= 1)) throw std::invalid_argument("wan: loss must be in [0, 1]");
  if (rate_bps != 0 && rate_bps < 8'000) throw std::invalid_argument("wan: rate below 8kbit is not a network");
  if (cc.empty() || cc.size() > 15 || cc.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
    throw std::invalid_argument("wan: cc must be a congestion control name like cubic, bbr, reno");
}

std::string WanConfig::to_string() const {
  std::string s = "hosts=" + std::to_string(hosts) + ",rtt=" + format_double(rtt_ms) + "ms" +
                  ",loss=" + format_double(loss) + ",rate=" + std::to_string(rate_bps) + "bit" +
                  ",cc=" + cc + ",seed=" + std::to_string(seed);
  if (burst_bytes) s += ",burst=" + std::to_string(burst_bytes);
  if (limit_bytes) s += ",limit=" + std::to_string(limit_bytes);
  if (!gso) s += ",gso=off";
  return s;
}

// Bucket of 1 ms of line rate (25 KB at 200 Mbit/s), and never below 64 KiB with gso (16 KiB,
// ten full frames, without). tbf sends a frame only when the bucket holds its whole wire size
// and cuts a GSO frame larger than the bucket back into MTU packets, which would undo the
// offload; the TUNs' GSO frames are capped at 32 KiB (wan_network.cpp), so they always fit.
// A bucket of a few ms keeps the wire close to a serialising link.
uint64_t WanConfig::tbf_burst_bytes() const {
  if (burst_bytes) return burst_bytes;
  return std::max<uint64_t>(rate_bps / 8 / 1000, gso ? 64 * 1024 : 16 * 1024);
}

// Queue of one bandwidth-delay product (the classic router buffer, 1.25 MB at 200 Mbit/s and
// 50 ms), never below 64 KiB. TCP's small-queue limit keeps a single socket from parking more
// than ~1 ms of data in it, so the queue only fills with many flows or unpaced senders, as a
// real bottleneck's would.
uint64_t WanConfig::tbf_limit_bytes() const {
  if (limit_bytes) return limit_bytes;
  const double bdp = static_cast<double>(rate_bps) / 8.0 * std::max(rtt_ms, 10.0) / 1e3;
  return std::max<uint64_t>(static_cast<uint64_t>(bdp), 64 * 1024);
}

uint64_t WanConfig::delay_line_bytes() const {
  // An unshaped host is assumed to send at most 1 Gbit/s: the single forwarder thread cannot
  // move much more than that anyway, and what does not fit is counted and dropped.
  const double per_host_Bps = static_cast<double>(rate_bps ? rate_bps : 1'000'000'000) / 8.0;
  const double one_way_s = rtt_ms / 2.0 / 1e3;
  const double bytes = 2.0 * hosts * per_host_Bps * one_way_s + 4.0 * 1024 * 1024;
  return std::min<uint64_t>(static_cast<uint64_t>(bytes), uint64_t{1} << 30);
}

}  // namespace ferry::wan
