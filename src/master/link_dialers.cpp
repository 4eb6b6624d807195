#include "master/link_dialers.h"

#include <algorithm>

namespace ferry::master {

std::vector<uint8_t> assign_dialers(const std::vector<uint64_t>& ring, const CanDial& can_dial) {
  const size_t n = ring.size();
  std::vector<uint8_t> receiver_dials(n, 0);
  if (n < 2) return {};
  for (size_t i = 0; i < n; ++i) {
    uint64_t sender = ring[i], receiver = ring[(i + 1) % n];
    receiver_dials[i] = !can_dial(sender, receiver) && can_dial(receiver, sender) ? 1 : 0;
  }
  if (std::none_of(receiver_dials.begin(), receiver_dials.end(), [](uint8_t r) { return r != 0; })) return {};
  return receiver_dials;
}

}  // namespace ferry::master
