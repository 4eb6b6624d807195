#include "peer/fetch_connect.h"

#include <future>

#include <asio/dispatch.hpp>

#include "net/dialer.h"
#include "net/frame_io.h"
#include "net/punch.h"
#include "peer/dial_candidates.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {
namespace {

using StreamResult = std::pair<Status, std::shared_ptr<net::Stream>>;

// Says `hello` on a connection this end opened and waits for the welcome.
Status say_hello(const LinkOptions& options, const std::shared_ptr<net::Stream>& stream, const wire::FetchHello& hello) {
  std::promise<Status> answered;
  asio::dispatch(stream->executor(), [&, stream] {
    dialer_handshake(stream, hello, options.secret, options.timeout, [&](Status hst, bool) { answered.set_value(hst); });
  });
  return answered.get_future().get();  // bounded by read_one_message's deadline
}

// Hears the hello on a punched connection and welcomes it when it is `expected`.
Status hear_hello(const LinkOptions& options, const std::shared_ptr<net::Stream>& stream,
                  const wire::FetchHello& expected) {
  std::promise<Status> welcomed;
  asio::dispatch(stream->executor(), [&, stream] {
    acceptor_handshake(stream, options.secret, options.timeout, [&, stream](Status st, std::optional<AcceptedHello> a) {
      if (!st.ok()) return welcomed.set_value(st);
      const auto* hello = std::get_if<wire::FetchHello>(&a->hello);
      if (!hello || hello->from_peer != expected.from_peer || hello->to_peer != expected.to_peer ||
          hello->epoch != expected.epoch || hello->seq != expected.seq || hello->dial != expected.dial) {
        stream->close();
        return welcomed.set_value(Status::failure(Errc::protocol, "a punched fetch connection said another hello"));
      }
      net::write_one_message(stream, wire::LinkWelcome{.proof = a->welcome_proof},
                             [&](Status wst) { welcomed.set_value(wst); });
    });
  });
  return welcomed.get_future().get();  // bounded by the handshake's deadlines
}

Status finish(Status st, const std::shared_ptr<net::Stream>& stream, std::shared_ptr<net::Stream>& out) {
  if (!st.ok()) {
    stream->abort();
    return st;
  }
  stream->enter_blocking_mode();
  out = stream;
  return Status::success();
}

}  // namespace

Status dial_fetch_peer(asio::any_io_executor executor, const LinkOptions& options, const wire::PeerAddress& to,
                       const wire::FetchHello& hello, std::shared_ptr<net::Stream>& out) {
  std::promise<StreamResult> dialed;
  net::dial(executor, dial_candidates(to), options.timeout, options.transport,
            [&dialed](Status st, std::shared_ptr<net::Stream> s) { dialed.set_value({st, s}); }, options.tuning);
  auto [st, stream] = dialed.get_future().get();  // bounded by the dialer's deadline
  if (!st.ok()) return st;
  return finish(say_hello(options, stream, hello), stream, out);
}

Status punch_fetch_peer(asio::any_io_executor executor, const LinkOptions& options, const wire::PeerAddress& to,
                        const wire::FetchHello& hello, uint32_t k, bool holder, std::shared_ptr<net::Stream>& out) {
  // The holder is the data's sender: end 0, as on a punched ring link.
  // Hashed per pair: a fetcher does not know whom else its holder serves. Two punched
  // fetches between peers on one address may, rarely, draw one port; that fetch then fails.
  const uint64_t key = net::punch_key({hello.epoch, hello.seq, hello.to_peer, hello.from_peer});
  const int own_end = holder ? 0 : 1;
  auto port = [&](int end) { return net::punch_port(net::PunchUse::fetch, key, k, end); };
  std::promise<StreamResult> punched;
  net::punch(executor, port(own_end), net::Endpoint{to.host, port(1 - own_end)},
             std::min(options.timeout, options.connect_timeout), options.transport, /*client=*/holder,
             [&punched](Status st, std::shared_ptr<net::Stream> s) { punched.set_value({st, s}); }, options.tuning);
  auto [st, stream] = punched.get_future().get();  // bounded by the punch's deadline
  if (!st.ok()) return st;
  return finish(holder ? say_hello(options, stream, hello) : hear_hello(options, stream, hello), stream, out);
}

}  // namespace ferry::peer
