// Which of a peer's addresses the master passes on (net/host_addresses.h).
#include <catch2/catch.hpp>

#include <asio/ip/address.hpp>

#include "net/host_addresses.h"

using namespace ferry;

TEST_CASE("host addresses: the master keeps a peer's addresses of the family it did not see it in",
          "[net][address]") {
  const std::vector<std::string> offered = {"10.0.0.5", "2001:db8::5", "fd77::5", "2001:db8::5"};
  CHECK(net::other_family_addresses("10.0.0.5", offered, 8) == std::vector<std::string>{"2001:db8::5", "fd77::5"});
  CHECK(net::other_family_addresses("2001:db8::5", offered, 8) == std::vector<std::string>{"10.0.0.5"});
  CHECK(net::other_family_addresses("::ffff:10.0.0.5", offered, 8) ==
        std::vector<std::string>{"2001:db8::5", "fd77::5"});  // a v4-mapped primary is IPv4
  CHECK(net::other_family_addresses("10.0.0.5", offered, 1) == std::vector<std::string>{"2001:db8::5"});
  // A name could stand for either family: every literal stays.
  CHECK(net::other_family_addresses("peer.example", offered, 8) ==
        std::vector<std::string>{"10.0.0.5", "2001:db8::5", "fd77::5"});
}

TEST_CASE("host addresses: names, loopback, link-local, multicast and garbage from a peer are dropped",
          "[net][address]") {
  const std::vector<std::string> offered = {"evil.example", "::1", "127.0.0.1", "fe80::1", "169.254.3.4",
                                            "ff02::1", "::", "0.0.0.0", "1.2.3", "", "2001:db8::9"};
  CHECK(net::other_family_addresses("10.0.0.5", offered, 8) == std::vector<std::string>{"2001:db8::9"});
  CHECK(net::other_family_addresses("2001:db8::5", offered, 8).empty());
}

TEST_CASE("host addresses: this host's interface addresses are global, IPv4 first, each once", "[net][address]") {
  const auto all = net::interface_addresses(true, true);
  bool seen_v6 = false;
  for (size_t i = 0; i < all.size(); ++i) {
    INFO(all[i]);
    const auto a = asio::ip::make_address(all[i]);
    CHECK_FALSE(a.is_loopback());
    CHECK_FALSE(a.is_unspecified());
    if (a.is_v6()) CHECK_FALSE(a.to_v6().is_link_local());
    if (a.is_v4()) CHECK_FALSE(seen_v6);
    seen_v6 = seen_v6 || a.is_v6();
    for (size_t j = 0; j < i; ++j) CHECK(all[j] != all[i]);
  }
  for (const auto& text : net::interface_addresses(true, false)) CHECK(asio::ip::make_address(text).is_v4());
  for (const auto& text : net::interface_addresses(false, true)) CHECK(asio::ip::make_address(text).is_v6());
  CHECK(net::interface_addresses(false, false).empty());
}
