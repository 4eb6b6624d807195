#include "wan_config.h"

#include "wan_units.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace ferry::wan {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

void apply(WanConfig& c, const std::string& key, const std::string& value) {
  if (key == "rtt") c.rtt_ms = parse_duration_ms(key, value);
  else if (key == "loss") c.loss = parse_loss(key, value);
  else if (key == "rate") c.rate_bps = parse_rate_bps(key, value);
  else if (key == "cc") c.cc = lower(value);
  else if (key == "seed") c.seed = parse_uint(key, value);
  else if (key == "hosts") c.hosts = static_cast<int>(std::min<uint64_t>(parse_uint(key, value), 100000));
  else if (key == "burst") c.burst_bytes = parse_bytes(key, value);
  else if (key == "limit") c.limit_bytes = parse_bytes(key, value);
  else if (key == "gso") c.gso = parse_bool(key, value);
  else throw std::invalid_argument("unknown key '" + key + "' (keys: hosts rtt loss rate cc seed burst limit gso)");
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
    try {
      apply(c, key, value);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("wan spec: ") + e.what());
    }
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

uint64_t WanConfig::tbf_burst_bytes() const { return burst_bytes ? burst_bytes : uplink_burst_bytes(rate_bps, gso); }
uint64_t WanConfig::tbf_limit_bytes() const { return limit_bytes ? limit_bytes : queue_limit_bytes(rate_bps, rtt_ms); }

// Bucket of 1 ms of line rate (25 KB at 200 Mbit/s), and never below 64 KiB with gso (16 KiB,
// ten full frames, without). tbf sends a frame only when the bucket holds its whole wire size
// and cuts a GSO frame larger than the bucket back into MTU packets, which would undo the
// offload; the TUNs' GSO frames are capped at 32 KiB (wan_network.cpp), so they always fit.
// A bucket of a few ms keeps the wire close to a serialising link.
uint64_t uplink_burst_bytes(uint64_t rate_bps, bool gso) {
  return std::max<uint64_t>(rate_bps / 8 / 1000, gso ? 64 * 1024 : 16 * 1024);
}

// Queue of one bandwidth-delay product (the classic router buffer, 1.25 MB at 200 Mbit/s and
// 50 ms), never below 64 KiB. TCP's small-queue limit keeps a single socket from parking more
// than ~1 ms of data in it, so the queue only fills with many flows or unpaced senders, as a
// real bottleneck's would.
uint64_t queue_limit_bytes(uint64_t rate_bps, double rtt_ms) {
  const double bdp = static_cast<double>(rate_bps) / 8.0 * std::max(rtt_ms, 10.0) / 1e3;
  return std::max<uint64_t>(static_cast<uint64_t>(bdp), 64 * 1024);
}

}  // namespace ferry::wan
