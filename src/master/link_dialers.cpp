#include "master/link_dialers.h"

#include <algorithm>

#include "wire/messages.h"

namespace ferry::master {

std::vector<uint8_t> assign_dialers(const std::vector<uint64_t>& ring, const CanDial& can_dial,
                                    const CanDial& can_punch) {
  const size_t n = ring.size();
  std::vector<uint8_t> receiver_dials(n, 0);
  if (n < 2) return {};
  for (size_t i = 0; i < n; ++i) {
    uint64_t sender = ring[i], receiver = ring[(i + 1) % n];
    wire::LinkDial dial = wire::LinkDial::sender;
    if (!can_dial(sender, receiver)) {
      if (can_dial(receiver, sender))
        dial = wire::LinkDial::receiver;
      else if (can_punch && can_punch(sender, receiver))
        dial = wire::LinkDial::both;
    }
    receiver_dials[i] = static_cast<uint8_t>(dial);
  }
  if (std::none_of(receiver_dials.begin(), receiver_dials.end(), [](uint8_t r) { return r != 0; })) return {};
  return receiver_dials;
}

}  // namespace ferry::master
