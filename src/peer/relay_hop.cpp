#include "peer/relay_hop.h"

#include <asio/dispatch.hpp>

#include "net/dialer.h"
#include "net/tcp_stream.h"
#include "peer/dial_candidates.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {

void open_relay_hop(asio::any_io_executor executor, const LinkOptions& options, const wire::RingMember& relay,
                    wire::RelayHello hello, RelayHopDone done) {
  wire::RingMember at = relay;
  at.port = relay.relay_port;
  auto failed = [executor, done](Status st) { done(std::move(st), asio::ip::tcp::socket(executor)); };
  const std::string who = "relay peer " + std::to_string(relay.peer_id);
  net::dial(
      executor, dial_candidates(at), std::min(options.timeout, options.connect_timeout), net::make_tcp_transport(),
      [options, hello, failed, done, who](Status st, std::shared_ptr<net::Stream> stream) {
        if (!st.ok()) return failed(Status::failure(st.code, who + ": " + st.message));
        asio::dispatch(stream->executor(), [options, hello, failed, done, who, stream] {
          // The welcome comes once the other end is there too: options.timeout bounds the wait.
          dialer_handshake(stream, hello, options.secret, options.timeout, [failed, done, who, stream](Status hst, bool) {
            if (!hst.ok()) {
              stream->close();
              return failed(Status::failure(hst.code, who + ": " + hst.message));
            }
            done(Status::success(), std::static_pointer_cast<net::TcpStream>(stream)->release_socket());
          });
        });
      },
      options.tuning);
}

}  // namespace ferry::peer
