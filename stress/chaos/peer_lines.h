// Reading ferry-chaos-peer's stdout protocol (see chaos_peer_main.cpp): one
// event per line, "KIND key=value key=value ...".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "invariants.h"

namespace ferry::chaos {

struct PeerLine {
  std::string kind;
  std::map<std::string, std::string, std::less<>> fields;

  // The field as a number; `fallback` when it is missing or malformed.
  double number(std::string_view key, double fallback = 0) const;
  std::string text(std::string_view key) const;
};

std::optional<PeerLine> parse_peer_line(std::string_view line);
// An "op" line as a report (peer name and id are the caller's); nullopt when malformed.
std::optional<OpReport> op_report(const PeerLine& line);
// A "state" line as a report (peer name and id are the caller's); nullopt when malformed.
std::optional<SyncReport> sync_report(const PeerLine& line);

}  // namespace ferry::chaos
