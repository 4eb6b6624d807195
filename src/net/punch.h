// A TCP simultaneous open: both ends of a connection neither can accept (each
// behind a stateful firewall, or a NAT that keeps its ports) connect to each
// other at once, each from a port the other knows. Each end's outbound SYN
// opens its own firewall for the other's, and the two SYNs meet as one
// connection (RFC 793's simultaneous open), with no listener on either side.
//
// Why retry: the far end may not have sent its SYN yet. A stateful firewall
// then drops ours silently (the kernel resends it), an open host answers with
// a reset (refused): a fresh socket on the same port tries again, until the
// deadline. Each end also listens on its port meanwhile, for the far end's SYN
// that arrives between two of its own attempts (on loopback or an open network
// a refusal is instant, and two connects seldom overlap). A `closed` host drops
// every inbound SYN, so a punch to it times out.
//
// Why not the listener's port: each lane needs its own 4-tuple, so the two
// ends agree a port per lane (punch_port()), away from the kernel's ephemeral
// range so that no dial of this host is likely to hold it.
//
// Threading: `done` runs once, on an executor of the socket, never inline.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include <asio/any_io_executor.hpp>

#include "net/endpoint.h"
#include "net/socket_options.h"
#include "net/transport.h"

namespace ferry::net {

// The port `end` (0: the data's sender, 1: its receiver) of lane `lane` binds for the
// simultaneous open of the link from `sender` to `receiver` in `epoch`: the same on both
// ends, different for each lane and end of a link (lanes < 64), in [61000, 65535), above
// Linux's default ephemeral range (32768-60999). `round` keeps other connections of the
// same pair and epoch off the ring link's ports (0: the ring; a shared-state fetch: its
// seq + 1), or the two would ask for one 4-tuple.
uint16_t punch_port(uint64_t epoch, uint64_t sender, uint64_t receiver, uint32_t lane, int end, uint64_t round = 0);

// Connects from `local_port` (any local address of the remote's family) to `remote`
// (a numeric address and its punch port) until one attempt connects or `timeout`
// passes, then opens the transport: its client side when `client`, else its server
// side (the two ends must choose differently). Errc::timeout when no attempt
// connected, Errc::connect when the address is not numeric or the port cannot be bound.
void punch(asio::any_io_executor executor, uint16_t local_port, const Endpoint& remote,
           std::chrono::milliseconds timeout, std::shared_ptr<Transport> transport, bool client, StreamReady done,
           SocketTuning tuning = {});

}  // namespace ferry::net
