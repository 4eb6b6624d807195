// The addresses a host can be dialled at, beyond the one the master sees.
//
// A dual-stack peer reaches its master over one family, so the master sees one
// address; a neighbour that has only the other family (an IPv6-only site, an
// IPv4-only one) needs the peer's address in that family. The peer reports its
// interfaces' addresses (interface_addresses), the master keeps those of the
// family it did not see (other_family_addresses), and dialers try them after
// the address the master saw (peer/dial_candidates.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ferry::net {

// Global addresses of this host's interfaces that are up, as text, IPv4 first: no
// loopback, link-local (fe80::/10, 169.254/16), multicast or unspecified ones.
// `v4`/`v6`: which families to list. Empty when the system will not say (getifaddrs
// failed). Thread-safe.
std::vector<std::string> interface_addresses(bool v4, bool v6);

// Of `offered` (a peer's report, untrusted), the IP literals of a family other than
// `primary`'s that interface_addresses could have listed, without duplicates, at most `max`. A primary that is a name, not a literal,
// keeps every literal: the master cannot tell which family it stands for. Names and
// malformed entries are dropped: a peer must not make its neighbours resolve names it
// chose. Thread-safe.
std::vector<std::string> other_family_addresses(const std::string& primary, const std::vector<std::string>& offered,
                                                size_t max);

}  // namespace ferry::net
