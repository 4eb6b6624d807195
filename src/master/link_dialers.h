// Who opens each ring link's connections. The data of a link always flows
// from a member to the next; the dialer is its sender when the sender can
// open a connection to the receiver, else the receiver when it can (a peer
// behind NAT or an inbound firewall dials out, so it still has two
// neighbours), else the sender again: that dial fails and the verdict
// routes around the pair (ring_verdict.h). When neither end can dial the
// other but `can_punch` says the pair may try, both ends connect at once
// (wire::LinkDial::both, a TCP simultaneous open through stateful firewalls
// and port-keeping NATs, net/punch.h). The ring solver only joins pairs that
// one end can dial, or that may punch when no ring exists without them
// (MasterState::ring_problem), so the last case is what the master has not
// learned yet.
//
// `can_dial(from, to)`: `to` accepts connections (it is not dial-out-only)
// and `from`'s last dial of it did not fail within its back-off (link_matrix.h).
// `can_punch(a, b)`: no simultaneous open between them failed within its back-off.
//
// Threading: none (pure).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace ferry::master {

using CanDial = std::function<bool(uint64_t from, uint64_t to)>;

// One wire::LinkDial per link of `ring` (link i: ring[i] -> ring[i + 1]). Empty when every
// sender dials (the wire's short form, wire::Topology::receiver_dials). `can_punch` null:
// no pair punches.
std::vector<uint8_t> assign_dialers(const std::vector<uint64_t>& ring, const CanDial& can_dial,
                                    const CanDial& can_punch = nullptr);

// Whether some end of the pair can dial the other: the ring may join them.
inline bool linkable(uint64_t a, uint64_t b, const CanDial& can_dial) { return can_dial(a, b) || can_dial(b, a); }

}  // namespace ferry::master
