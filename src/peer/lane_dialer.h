// Dials one lane of a ring link: a connection to the next peer, then the link
// hello/welcome handshake (p2p_handshake.h). Link set-up dials a ring's first
// lanes with it, and a link that grows (lane_tuner.h) its further ones.
//
// With `offer_shared_memory` and a same-host key, the hello offers a
// shared-memory ring; the stream handed back then goes through it when the
// far side mapped it (`shared_memory`). Any failure to make one stays on TCP.
#pragma once

#include <functional>
#include <memory>

#include <asio/any_io_executor.hpp>

#include "net/stream.h"
#include "peer/link_options.h"
#include "wire/messages.h"

namespace ferry::peer {

using LaneDialed = std::function<void(Status, std::shared_ptr<net::Stream>, bool shared_memory)>;

// `hello`: everything but the shared-memory fields, which this fills. `done` runs once, on some I/O thread.
void dial_lane(asio::any_io_executor executor, const LinkOptions& options, const wire::RingMember& to,
               wire::LinkHello hello, bool offer_shared_memory, LaneDialed done);

}  // namespace ferry::peer
