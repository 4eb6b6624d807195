#include "peer/p2p_inbound.h"

#include <asio/dispatch.hpp>

#include "core/log.h"
#include "core/log_throttle.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {

void accept_p2p(asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> stranger,
                const LinkOptions& options, InboundRoutes routes) {
  if (Status tuned = net::apply_tuning(socket, options.tuning); !tuned.ok()) log().warn("inbound link: {}", tuned.message);
  options.transport->open_server(
      std::move(socket), [secret = options.secret, timeout = options.timeout, routes = std::move(routes), stranger](
                             Status st, std::shared_ptr<net::Stream> stream) {
        if (!st.ok()) return log().debug("dropped an inbound link: {}", st.message);
        asio::dispatch(stream->executor(), [secret, timeout, routes, stream, stranger] {
          acceptor_handshake(stream, secret, timeout,
                             [routes, stream, stranger](Status hst, std::optional<AcceptedHello> accepted) {
                               stranger->release();  // proved, or refused and closed: no longer a stranger
                               if (!hst.ok()) {
                                 static LogThrottle refusals;  // a storm of bad proofs is one line a second
                                 if (hst.code == Errc::auth)
                                   if (uint64_t events = refusals.admit())
                                     log().warn("refused {} p2p connection(s) that failed authentication; last from {}: {}",
                                                events, stream->remote_host(), hst.message);
                                 return;
                               }
                               if (auto* link = std::get_if<wire::LinkHello>(&accepted->hello))
                                 return routes.link(*link, accepted->welcome_proof, stream);
                               if (auto* probe = std::get_if<wire::ProbeHello>(&accepted->hello))
                                 return routes.probe(*probe, accepted->welcome_proof, stream);
                               if (auto* fetch = std::get_if<wire::FetchHello>(&accepted->hello))
                                 return routes.fetch(*fetch, accepted->welcome_proof, stream);
                               // A relay_hello belongs on the relay port (relay_service.h), not here.
                               stream->close();
                             });
        });
      });
}

}  // namespace ferry::peer
