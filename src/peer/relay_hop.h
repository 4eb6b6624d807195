// A ring neighbour's connection to its link's relay (wire::LinkDial::relay,
// peer/relay_service.h): dialed to the relay's relay_port over plain TCP, a
// relay_hello (with the run secret's proof) that names the lane, then the
// relay's welcome once the other end of the same lane has come too. The raw
// socket is then handed back: the caller runs the run's transport (TLS) and
// the link hello through the relay to its neighbour, end to end.
//
// Threading: `done` runs once, on an executor of the socket, never inline.
#pragma once

#include <functional>

#include <asio/any_io_executor.hpp>
#include <asio/ip/tcp.hpp>

#include "core/error.h"
#include "peer/link_options.h"
#include "wire/messages.h"

namespace ferry::peer {

using RelayHopDone = std::function<void(Status, asio::ip::tcp::socket)>;

// Errc::connect when the relay cannot be dialed or refuses, Errc::timeout when the lane's
// other end does not come within options.timeout, Errc::auth on a bad proof either way.
void open_relay_hop(asio::any_io_executor executor, const LinkOptions& options, const wire::RingMember& relay,
                    wire::RelayHello hello, RelayHopDone done);

}  // namespace ferry::peer
