#include "peer/p2p_inbound.h"

#include <future>

#include <asio/dispatch.hpp>

#include "core/log.h"
#include "core/log_throttle.h"
#include "net/dialer.h"
#include "peer/dial_candidates.h"
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
                               routes.fetch(std::get<wire::FetchHello>(accepted->hello), accepted->welcome_proof, stream);
                             });
        });
      });
}

Status dial_holder(asio::any_io_executor executor, const LinkOptions& options, const wire::PeerAddress& holder,
                   const wire::FetchHello& hello, std::shared_ptr<net::Stream>& out) {
  std::promise<std::pair<Status, std::shared_ptr<net::Stream>>> dialed;
  net::dial(executor, dial_candidates(holder), options.timeout, options.transport,
            [&dialed](Status st, std::shared_ptr<net::Stream> s) { dialed.set_value({st, s}); }, options.tuning);
  auto [st, stream] = dialed.get_future().get();  // bounded by the dialer's deadline
  if (!st.ok()) return st;
  std::promise<Status> answered;
  asio::dispatch(stream->executor(), [&, stream] {
    dialer_handshake(stream, hello, options.secret, options.timeout, [&](Status hst, bool) { answered.set_value(hst); });
  });
  Status handshake = answered.get_future().get();  // bounded by read_one_message's deadline
  if (!handshake.ok()) {
    stream->abort();
    return handshake;
  }
  stream->enter_blocking_mode();
  out = stream;
  return Status::success();
}

}  // namespace ferry::peer
