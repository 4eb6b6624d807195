#include "net/host_addresses.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <optional>

#include <asio/ip/address.hpp>

#include "net/remote_host.h"

namespace ferry::net {
namespace {

std::optional<asio::ip::address> parse_literal(const std::string& text) {
  std::error_code ec;
  auto address = asio::ip::make_address(text, ec);
  if (ec) return std::nullopt;
  return unmapped(address);
}

bool is_global(const asio::ip::address& a) {
  if (a.is_unspecified() || a.is_loopback() || a.is_multicast()) return false;
  if (a.is_v6()) return !a.to_v6().is_link_local() && !a.to_v6().is_v4_mapped();
  return (a.to_v4().to_uint() & 0xffff0000u) != 0xa9fe0000u;  // 169.254/16
}

}  // namespace

std::vector<std::string> interface_addresses(bool v4, bool v6) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  std::vector<asio::ip::address> found;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || !(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) continue;
    asio::ip::address a;
    if (i->ifa_addr->sa_family == AF_INET && v4) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      a = asio::ip::address_v4(ntohl(in->sin_addr.s_addr));
    } else if (i->ifa_addr->sa_family == AF_INET6 && v6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      asio::ip::address_v6::bytes_type bytes;
      std::copy_n(in6->sin6_addr.s6_addr, bytes.size(), bytes.begin());
      a = asio::ip::address_v6(bytes);
    } else {
      continue;
    }
    if (is_global(a) && std::find(found.begin(), found.end(), a) == found.end()) found.push_back(a);
  }
  ::freeifaddrs(list);
  std::stable_partition(found.begin(), found.end(), [](const auto& a) { return a.is_v4(); });
  std::vector<std::string> out;
  for (const auto& a : found) out.push_back(a.to_string());
  return out;
}

std::vector<std::string> other_family_addresses(const std::string& primary, const std::vector<std::string>& offered,
                                                size_t max) {
  const auto seen = parse_literal(primary);
  std::vector<asio::ip::address> kept;
  for (const std::string& text : offered) {
    const auto a = parse_literal(text);
    if (!a || !is_global(*a)) continue;
    if (seen && a->is_v4() == seen->is_v4()) continue;
    if (std::find(kept.begin(), kept.end(), *a) != kept.end()) continue;
    if (kept.size() == max) break;
    kept.push_back(*a);
  }
  std::vector<std::string> out;
  for (const auto& a : kept) out.push_back(a.to_string());
  return out;
}

}  // namespace ferry::net
