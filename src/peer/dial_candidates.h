// The endpoints a peer is dialled at, in order: the address the master saw it
// at (or the one it advertised), then its addresses of the other family
// (net/host_addresses.h), so an IPv4-only neighbour and an IPv6-only one both
// reach a dual-stack peer.
#pragma once

#include <vector>

#include "net/endpoint.h"
#include "wire/messages.h"

namespace ferry::peer {

inline std::vector<net::Endpoint> dial_candidates(const wire::PeerAddress& to) {
  std::vector<net::Endpoint> out{{to.host, to.port}};
  for (const std::string& host : to.other_hosts) out.push_back({host, to.port});
  return out;
}

}  // namespace ferry::peer
