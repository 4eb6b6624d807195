#include "net/dialer.h"

#include <asio/connect.hpp>
#include <asio/dispatch.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

namespace ferry::net {
namespace {

struct DialAttempt : std::enable_shared_from_this<DialAttempt> {
  DialAttempt(asio::any_io_executor ex, Endpoint ep, std::shared_ptr<Transport> t, StreamReady d)
      : strand(asio::make_strand(ex)), resolver(strand), socket(strand), timer(strand),
        endpoint(std::move(ep)), transport(std::move(t)), done(std::move(d)) {}

  void start(std::chrono::milliseconds timeout) {
    timer.expires_after(timeout);
    timer.async_wait([self = shared_from_this(), timeout](std::error_code ec) {
      if (ec || self->finished) return;
      self->fail(Errc::timeout, "no connection within " + std::to_string(timeout.count()) + " ms");
    });
    resolver.async_resolve(endpoint.host, std::to_string(endpoint.port),
                           [self = shared_from_this()](std::error_code ec, auto results) {
                             if (self->finished) return;
                             if (ec) return self->fail(Errc::connect, "cannot resolve: " + ec.message());
                             self->connect(results);
                           });
  }

  void connect(const asio::ip::tcp::resolver::results_type& results) {
    asio::async_connect(socket, results, [self = shared_from_this()](std::error_code ec, const auto&) {
      if (self->finished) return;
      // Out of descriptors or buffers is this process's trouble, not the far end's: say so (Errc::system).
      if (ec == std::errc::too_many_files_open || ec == std::errc::too_many_files_open_in_system ||
          ec == std::errc::no_buffer_space || ec == std::errc::not_enough_memory)
        return self->fail(Errc::system, "out of local resources: " + ec.message());
      if (ec) return self->fail(Errc::connect, ec.message());
      if (Status tuned = apply_tuning(self->socket, self->tuning); !tuned.ok())
        return self->fail(tuned.code, tuned.message);
      self->transport->open_client(std::move(self->socket),
                                   [self](Status st, std::shared_ptr<Stream> stream) {
                                     asio::dispatch(self->strand, [self, st, stream] {
                                       if (self->finished) {
                                         if (stream) stream->close();
                                         return;
                                       }
                                       self->finished = true;
                                       self->timer.cancel();
                                       if (!st.ok()) return self->done(st, nullptr);
                                       self->done(Status::success(), stream);
                                     });
                                   });
    });
  }

  void fail(Errc code, const std::string& why) {
    finished = true;
    timer.cancel();
    resolver.cancel();
    std::error_code ignored;
    socket.close(ignored);
    done(Status::failure(code, "cannot connect to " + endpoint.to_string() + ": " + why), nullptr);
  }

  asio::strand<asio::any_io_executor> strand;
  asio::ip::tcp::resolver resolver;
  asio::ip::tcp::socket socket;
  asio::steady_timer timer;
  Endpoint endpoint;
  std::shared_ptr<Transport> transport;
  StreamReady done;
  SocketTuning tuning;
  bool finished = false;
};

}  // namespace

void dial(asio::any_io_executor executor, const Endpoint& endpoint, std::chrono::milliseconds timeout,
          std::shared_ptr<Transport> transport, StreamReady done, SocketTuning tuning) {
  auto attempt = std::make_shared<DialAttempt>(executor, endpoint, std::move(transport), std::move(done));
  attempt->tuning = std::move(tuning);
  asio::dispatch(attempt->strand, [attempt, timeout] { attempt->start(timeout); });
}

}  // namespace ferry::net
