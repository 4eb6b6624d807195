// Outgoing connections with a deadline: resolve, connect, then the transport's
// handshake, all within `timeout`. Several candidates (a peer's addresses in
// each family) are resolved and tried in order, as a name's addresses are: the
// first that takes the connection wins, one that cannot be routed fails at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "net/endpoint.h"
#include "net/socket_options.h"
#include "net/transport.h"

namespace ferry::net {

// `done` runs exactly once: Errc::connect when refused or unreachable,
// Errc::timeout when the deadline passed first, Errc::system when this
// process is out of descriptors or buffers (its own trouble, not the far end's).
void dial(asio::any_io_executor executor, const Endpoint& endpoint, std::chrono::milliseconds timeout,
          std::shared_ptr<Transport> transport, StreamReady done, SocketTuning tuning = {});
// The same over `candidates` (at least one); a failure names every one tried.
void dial(asio::any_io_executor executor, std::vector<Endpoint> candidates, std::chrono::milliseconds timeout,
          std::shared_ptr<Transport> transport, StreamReady done, SocketTuning tuning = {});

// How far a dial got. `answered` is false when nothing took the connection
// (refused, unreachable, no answer before the deadline): a far end that is not
// up yet, worth dialing again. True once one took it, even when its transport
// handshake then failed (a TLS side dialing a plain one: dialing again cannot help).
struct DialOutcome {
  Status status;
  std::shared_ptr<Stream> stream;  // set on success
  bool answered = false;
  bool resolved = true;  // false: no candidate's name resolved (nothing was dialed)
};
using DialDone = std::function<void(DialOutcome)>;
void dial(asio::any_io_executor executor, const Endpoint& endpoint, std::chrono::milliseconds timeout,
          std::shared_ptr<Transport> transport, DialDone done, SocketTuning tuning = {});

}  // namespace ferry::net
