#include "peer/lane_dialer.h"

#include <algorithm>
#include <asio/dispatch.hpp>

#include "core/log.h"
#include "net/dialer.h"
#include "net/host_identity.h"
#include "net/shm_ring.h"
#include "net/shm_stream.h"
#include "peer/dial_candidates.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {
namespace {

// The ring this lane offers the next peer, or null (off, or none could be made).
std::shared_ptr<net::ShmRing> offer_ring(const LinkOptions& options, uint64_t to_peer) {
  if (!options.same_host.enabled || net::same_host_key().empty()) return nullptr;
  try {
    return net::ShmRing::create(options.same_host.ring_bytes);
  } catch (const Error& e) {
    log().info("ring link to peer {} stays on TCP: {}", to_peer, e.what());
    return nullptr;
  }
}

}  // namespace

void dial_lane(asio::any_io_executor executor, const LinkOptions& options, const wire::RingMember& to,
               wire::LinkHello hello, bool offer_shared_memory, LaneDialed done) {
  net::dial(
      executor, dial_candidates(to), std::min(options.timeout, options.connect_timeout), options.transport,
      [options, hello = std::move(hello), offer_shared_memory, done = std::move(done)](
          Status st, std::shared_ptr<net::Stream> stream) mutable {
        if (!st.ok()) return done(st, nullptr, false);
        auto ring = offer_shared_memory ? offer_ring(options, hello.to_peer) : nullptr;
        if (ring) {
          hello.host_key = net::same_host_key();
          hello.shm_ring = ring->name();
        }
        asio::dispatch(stream->executor(), [options, done, stream, hello, ring] {
          dialer_handshake(stream, hello, options.secret, options.timeout,
                           [done, stream, ring](Status hst, bool shm_accepted) {
                             // Mapped by the acceptor or refused: either way the name has served.
                             if (ring) ring->unlink();
                             if (!hst.ok()) return done(hst, nullptr, false);
                             if (!shm_accepted || !ring) return done(Status::success(), stream, false);
                             done(Status::success(), std::make_shared<net::ShmStream>(stream, ring), true);
                           });
        });
      },
      options.tuning);
}

}  // namespace ferry::peer
