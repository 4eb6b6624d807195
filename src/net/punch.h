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
#include <initializer_list>
#include <memory>

#include <asio/any_io_executor.hpp>

#include "net/endpoint.h"
#include "net/socket_options.h"
#include "net/transport.h"

namespace ferry::net {

// What a punched connection is for: each use has its own block of ports, above Linux's
// default ephemeral range (32768-60999), so a fetch never asks for a ring lane's port.
enum class PunchUse { ring_link, fetch };

// The port `end` (0: the data's sender, 1: its receiver) binds for connection `slot` of
// the punches that share `key` (punch_key()): the same on both ends. Slots of one key get
// distinct ports until the block wraps (1500 slots for ring links, 768 for fetches).
// Why slots and not a hash per link: on one address (peers on one host, or loopback)
// two links drawing overlapping ports would ask for one 4-tuple, and their connections
// would cross (each end greeted by the other link's hello). A ring's links therefore
// number their lanes in ring order (link i's lane l: slot i x lanes + l) under one key.
uint16_t punch_port(PunchUse use, uint64_t key, uint32_t slot, int end);

// Mixes the names of a set of punches (an epoch, a group, peers) into one key.
uint64_t punch_key(std::initializer_list<uint64_t> parts);

// Connects from `local_port` (any local address of the remote's family) to `remote`
// (a numeric address and its punch port) until one attempt connects or `timeout`
// passes, then opens the transport: its client side when `client`, else its server
// side (the two ends must choose differently). Errc::timeout when no attempt
// connected, Errc::connect when the address is not numeric or the port cannot be bound.
void punch(asio::any_io_executor executor, uint16_t local_port, const Endpoint& remote,
           std::chrono::milliseconds timeout, std::shared_ptr<Transport> transport, bool client, StreamReady done,
           SocketTuning tuning = {});

}  // namespace ferry::net
