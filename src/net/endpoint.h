// "host:port" addresses as users write them: "127.0.0.1:48148", "[::1]:5000",
// "master.example.org:48148".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::net {

struct Endpoint {
  std::string host;
  uint16_t port = 0;

  std::string to_string() const;
  bool operator==(const Endpoint&) const = default;
};

// nullopt (and *error set) for an empty host, a missing/non-numeric/out-of-range
// port, or an unbracketed IPv6 literal. allow_port_zero: listen addresses.
std::optional<Endpoint> parse_endpoint(std::string_view text, bool allow_port_zero,
                                       std::string* error);

// A listen address: as parse_endpoint (port 0 allowed: any free port), and a
// bare port ("9100" or ":9100") means loopback only, 127.0.0.1, so that
// serving something "on port 9100" never exposes it by accident.
std::optional<Endpoint> parse_listen_endpoint(std::string_view text, std::string* error);

}  // namespace ferry::net
