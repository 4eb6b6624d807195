// Connections other peers open to this one's p2p listener: tuned like every
// p2p socket, opened by the transport (TLS or not), handshaken
// (p2p_handshake.h), then handed on by what the dialer asked for: a ring
// link, a fetch of shared state, or a link probe (link_probe.h).
//
// Threading: accept() from the listener's handler; the routes run on the
// connection's strand, once each connection is handshaken.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <asio/ip/tcp.hpp>

#include "net/stranger_gate.h"
#include "peer/link_setup.h"

namespace ferry::peer {

struct InboundRoutes {
  std::function<void(const wire::LinkHello&, const std::string& welcome_proof, const std::shared_ptr<net::Stream>&)> link;
  std::function<void(const wire::FetchHello&, const std::string& welcome_proof, const std::shared_ptr<net::Stream>&)> fetch;
  std::function<void(const wire::ProbeHello&, const std::string& welcome_proof, const std::shared_ptr<net::Stream>&)> probe;
};

// `stranger` holds the connection's place under the listener's caps until its
// handshake ends, either way (net/stranger_gate.h).
void accept_p2p(asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> stranger,
                const LinkOptions& options, InboundRoutes routes);

}  // namespace ferry::peer
