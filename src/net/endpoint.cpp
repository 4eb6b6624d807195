#include "net/endpoint.h"

#include <charconv>

namespace ferry::net {

std::string Endpoint::to_string() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<Endpoint> parse_endpoint(std::string_view text, bool allow_port_zero,
                                       std::string* error) {
  auto fail = [&](std::string why) -> std::optional<Endpoint> {
    if (error) *error = "address '" + std::string(text) + "': " + why;
    return std::nullopt;
  };
  // "http://host:port/": a URL pasted where HOST:PORT belongs, whose colons read as an IPv6 address's.
  if (auto scheme = text.find("://"); scheme != std::string_view::npos)
    return fail("a master or listen address is HOST:PORT, not a URL: drop '" + std::string(text.substr(0, scheme + 3)) +
                "' (and any path), e.g. 10.0.0.1:48148 or [::1]:48148");
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return fail("missing ']'");
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') return fail("expected ':PORT' after ']'");
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return fail("expected HOST:PORT");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      return fail("write IPv6 addresses in brackets, e.g. [::1]:48148");
  }
  if (host.empty()) return fail("empty host");
  if (host.size() > 255) return fail("host longer than 255 characters");
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size())
    return fail("port is not a number");
  if (value > 65535) return fail("port above 65535");
  if (value == 0 && !allow_port_zero) return fail("port 0 is not dialable");
  return Endpoint{std::string(host), static_cast<uint16_t>(value)};
}

std::optional<Endpoint> parse_listen_endpoint(std::string_view text, std::string* error) {
  std::string_view port = !text.empty() && text.front() == ':' ? text.substr(1) : text;
  if (!port.empty() && port.find_first_not_of("0123456789") == std::string_view::npos) {
    auto endpoint = parse_endpoint("127.0.0.1:" + std::string(port), true, error);
    if (!endpoint && error) *error = "address '" + std::string(text) + "': port above 65535";
    return endpoint;
  }
  return parse_endpoint(text, true, error);
}

}  // namespace ferry::net
