#include "peer_lines.h"

#include <charconv>
#include <cstdlib>
#include <sstream>

namespace ferry::chaos {

double PeerLine::number(std::string_view key, double fallback) const {
  auto it = fields.find(key);
  if (it == fields.end() || it->second.empty()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  return end != nullptr && *end == '\0' ? v : fallback;
}

std::string PeerLine::text(std::string_view key) const {
  auto it = fields.find(key);
  return it == fields.end() ? std::string() : it->second;
}

std::optional<PeerLine> parse_peer_line(std::string_view text) {
  std::istringstream in{std::string(text)};
  PeerLine line;
  if (!(in >> line.kind)) return std::nullopt;
  for (std::string word; in >> word;) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0) return std::nullopt;
    line.fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return line;
}

namespace {

template <typename T>
bool integer(const PeerLine& line, std::string_view key, T* out) {
  const std::string text = line.text(key);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// "ring=ID,ID,.." ("-": empty) into *out; false when an id is malformed.
bool ring_ids(const PeerLine& line, std::vector<std::uint64_t>* out) {
  const std::string ring = line.text("ring");
  if (ring == "-") return true;
  std::istringstream in(ring);
  for (std::string id; std::getline(in, id, ',');) {
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), value);
    if (ec != std::errc() || end != id.data() + id.size()) return false;
    out->push_back(value);
  }
  return true;
}

}  // namespace

std::optional<OpReport> op_report(const PeerLine& line) {
  if (line.kind != "op") return std::nullopt;
  OpReport r;
  if (!integer(line, "step", &r.step) || !integer(line, "k", &r.k) || !integer(line, "epoch", &r.epoch) ||
      !integer(line, "result", &r.result))
    return std::nullopt;
  if (!ring_ids(line, &r.ring)) return std::nullopt;
  r.hash = line.text("hash");
  r.error = line.number("err", 1e30);
  r.t0 = line.number("t0", -1);
  r.t1 = line.number("t1", -1);
  if (r.t0 < 0 || r.t1 < 0) return std::nullopt;
  r.start_s = line.number("start", 0);
  r.stall_s = line.number("stall", 0);
  r.commit_s = line.number("commit", 0);
  return r;
}

std::optional<SyncReport> sync_report(const PeerLine& line) {
  if (line.kind != "state") return std::nullopt;
  SyncReport r;
  if (!integer(line, "step", &r.step) || !integer(line, "epoch", &r.epoch) || !integer(line, "result", &r.result) ||
      !integer(line, "revision", &r.revision) || !integer(line, "received", &r.received) ||
      !ring_ids(line, &r.ring))
    return std::nullopt;
  r.hash = line.text("hash");
  r.t1 = line.number("t1", -1);
  if (r.t1 < 0) return std::nullopt;
  return r;
}

}  // namespace ferry::chaos
