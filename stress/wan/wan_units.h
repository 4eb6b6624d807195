// The units humans write for a network, shared by the spec string (wan_config.h) and the
// topology file (topology.h) so that "80ms", "0.1%" and "200mbit" mean the same in both.
//
// Each parser throws std::invalid_argument("bad <key>='<value>' (<what it accepts>)"); the
// caller prefixes where the value came from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::wan {

// A duration in ms: 50ms, 0.2s, 500us; a bare number is ms. Never negative.
double parse_duration_ms(std::string_view key, std::string_view value);
// A percentage like 0.1% or a fraction in [0, 1].
double parse_loss(std::string_view key, std::string_view value);
// bit|kbit|mbit|gbit per second (tc's spelling; "mbps" is refused because tc reads it as
// megabytes); 0, "none" or "unlimited" = unshaped, returned as 0.
uint64_t parse_rate_bps(std::string_view key, std::string_view value);
// Bytes with an optional k or m suffix (KiB, MiB).
uint64_t parse_bytes(std::string_view key, std::string_view value);
uint64_t parse_uint(std::string_view key, std::string_view value);
bool parse_bool(std::string_view key, std::string_view value);  // on|off|true|false|1|0|yes|no

std::string lower(std::string_view s);
std::string format_double(double v);  // shortest text that reads back equal (%.10g)
std::string format_rate(uint64_t bps);  // 200mbit, 1.5gbit, 64kbit, none

}  // namespace ferry::wan
