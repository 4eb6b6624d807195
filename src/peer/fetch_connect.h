// How the connections of a shared-state fetch come up, whichever end can open
// them (wire::FetchDial): the fetcher dials the holder; the holder dials the
// fetcher (it accepts no connection); or both punch through at once (neither
// does, net/punch.h). The opener (in a punch, the holder) says the
// fetch_hello and the other end answers with link_welcome, as on every p2p
// connection (p2p_handshake.h); once welcomed, the fetcher asks and the holder
// serves over the same raw frames (wire/fetch_frames.h).
//
// Threading: every call blocks its (fetch or serve) thread, each wait bounded
// by the options' deadlines; returned streams are in blocking mode.
#pragma once

#include <cstdint>
#include <memory>

#include <asio/any_io_executor.hpp>

#include "peer/link_options.h"
#include "wire/messages.h"

namespace ferry::peer {

// Dials `to` (a holder's listener, or a fetcher's when the holder opens), says `hello`,
// and waits for its welcome: at most twice options.timeout (the dial, then the handshake).
Status dial_fetch_peer(asio::any_io_executor executor, const LinkOptions& options, const wire::PeerAddress& to,
                       const wire::FetchHello& hello, std::shared_ptr<net::Stream>& out);

// Connection `k` of a punched fetch (hello.dial is FetchDial::both) between hello.from_peer
// (the fetcher) and hello.to_peer (the holder). The holder's side (`holder`) is the TLS
// client and says `hello`; the fetcher's side checks that the hello it hears is this one
// and welcomes it. Errc::timeout when the punch never connected.
Status punch_fetch_peer(asio::any_io_executor executor, const LinkOptions& options, const wire::PeerAddress& to,
                        const wire::FetchHello& hello, uint32_t k, bool holder, std::shared_ptr<net::Stream>& out);

}  // namespace ferry::peer
