// Which member relays a ring link that neither end can dial nor punch through
// (wire::LinkDial::relay, peer/relay_service.h): a third member that both ends
// can dial and that offers relaying (its relay_port; a peer may refuse). Its
// uplink and downlink then carry that hop besides its own ring traffic, so the
// solver counts a relayed pair at half what the hop's worse leg carries, and
// among relays the one relaying fewest hops of this ring goes first, then the
// one with the most capacity, then the smaller id (every choice reproducible).
//
// Threading: none (pure).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "master/link_dialers.h"

namespace ferry::master {

struct RelayReach {
  CanDial can_dial;                                              // as for assign_dialers
  std::function<bool(uint64_t member)> relays;                   // it offers relaying
  std::function<bool(uint64_t a, uint64_t b, uint64_t relay)> failed;  // a hop a -> b through it failed lately
  std::function<double(uint64_t from, uint64_t to)> capacity;    // bytes/s, 0 unknown (LinkMatrix)
};

// What a -> b carries through its best relay among `members` (half the worse leg;
// 0 when a leg is unmeasured), or nothing when no member can relay it.
std::optional<double> relayed_capacity(uint64_t a, uint64_t b, const std::vector<uint64_t>& members,
                                       const RelayReach& reach);

// For each link of `ring` (link i: ring[i] -> ring[i + 1]) that `dials` (assign_dialers'
// answer, empty: every sender dials) leaves to a dial that cannot succeed (a sender that
// cannot dial its receiver), a relay among the ring's members: that link's entry becomes
// LinkDial::relay and its relay is returned at its index (0 elsewhere). Empty when no link
// is relayed. A link no member can relay keeps its doomed dial (the verdict routes around it).
std::vector<uint64_t> assign_relays(const std::vector<uint64_t>& ring, std::vector<uint8_t>& dials,
                                    const RelayReach& reach);

}  // namespace ferry::master
