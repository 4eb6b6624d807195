// How this peer builds and dials the lanes (connections) of its ring links.
#pragma once

#include <chrono>
#include <memory>

#include "core/run_secret.h"
#include "net/socket_options.h"
#include "net/transport.h"
#include "peer/op_registry.h"

namespace ferry::peer {

// The lanes a link starts with when the count adapts (p2p_connections 0):
// the count that served every link before it adapted, enough for a LAN.
inline constexpr uint32_t kStartLanes = 4;

// Whether same-host lanes use shared memory, and each ring's size in bytes.
struct SameHostLinks {
  bool enabled = true;
  size_t ring_bytes = 1 << 20;
};

// How this peer builds the links of every ring.
struct LinkOptions {
  std::shared_ptr<net::Transport> transport;
  net::SocketTuning tuning;                 // applied to every p2p socket
  std::shared_ptr<const RunSecret> secret;  // null: unauthenticated
  SameHostLinks same_host;
  std::chrono::milliseconds timeout{60'000};  // the whole set-up, and each handshake
  std::weak_ptr<OpRegistry> ops;              // where the links' incoming chunks go
  // The most lanes a TCP link may grow to (lane_tuner.h); at most the ring's
  // lanes pins the count (the user chose p2p_connections).
  uint32_t max_lanes = 64;
  // A growing link may switch its lanes to bbr (the kernel lets this process,
  // and the user named no congestion control).
  bool bbr_allowed = false;
  // Opening one lane's connection. A firewall that drops SYNs answers with
  // silence: 10 s is four SYN retransmissions, and past it the master can
  // route around the pair (link_setup.h) instead of waiting the whole timeout.
  std::chrono::milliseconds connect_timeout{10'000};
};

// Where a link to one peer settled (lane_tuner.h), for the next links to it.
struct SettledLink {
  uint32_t lanes = 0;  // 0: never grew
  bool bbr = false;
};

}  // namespace ferry::peer
