#include "master/relay_choice.h"

#include <algorithm>
#include <map>

#include "wire/messages.h"

namespace ferry::master {
namespace {

bool can_relay(uint64_t a, uint64_t b, uint64_t r, const RelayReach& reach) {
  return r != a && r != b && reach.relays(r) && reach.can_dial(a, r) && reach.can_dial(b, r) &&
         !(reach.failed && reach.failed(a, b, r));
}

double through(uint64_t a, uint64_t b, uint64_t r, const RelayReach& reach) {
  const double in = reach.capacity(a, r), out = reach.capacity(r, b);
  return in > 0 && out > 0 ? std::min(in, out) / 2 : 0;
}

}  // namespace

std::optional<double> relayed_capacity(uint64_t a, uint64_t b, const std::vector<uint64_t>& members,
                                       const RelayReach& reach) {
  std::optional<double> best;
  for (uint64_t r : members)
    if (can_relay(a, b, r, reach)) best = std::max(best.value_or(0), through(a, b, r, reach));
  return best;
}

std::vector<uint64_t> assign_relays(const std::vector<uint64_t>& ring, std::vector<uint8_t>& dials,
                                    const RelayReach& reach) {
  const size_t n = ring.size();
  if (n < 3) return {};
  std::vector<uint64_t> relays(n, 0);
  std::map<uint64_t, int> carried;  // hops each member relays in this ring
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t a = ring[i], b = ring[(i + 1) % n];
    const auto dial = i < dials.size() ? static_cast<wire::LinkDial>(dials[i]) : wire::LinkDial::sender;
    if (dial != wire::LinkDial::sender || reach.can_dial(a, b)) continue;
    uint64_t chosen = 0;
    for (uint64_t r : ring) {
      if (!can_relay(a, b, r, reach)) continue;
      if (chosen == 0) {
        chosen = r;
        continue;
      }
      const int load = carried[r], chosen_load = carried[chosen];
      const double cap = through(a, b, r, reach), chosen_cap = through(a, b, chosen, reach);
      if (load < chosen_load || (load == chosen_load && (cap > chosen_cap || (cap == chosen_cap && r < chosen))))
        chosen = r;
    }
    if (chosen == 0) continue;
    if (dials.empty()) dials.assign(n, static_cast<uint8_t>(wire::LinkDial::sender));
    dials[i] = static_cast<uint8_t>(wire::LinkDial::relay);
    relays[i] = chosen;
    ++carried[chosen];
    any = true;
  }
  if (!any) return {};
  return relays;
}

}  // namespace ferry::master
