#include "net/dialer.h"

#include <asio/connect.hpp>
#include <asio/dispatch.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "core/duration_text.h"

namespace ferry::net {
namespace {

struct DialAttempt : std::enable_shared_from_this<DialAttempt> {
  DialAttempt(asio::any_io_executor ex, std::vector<Endpoint> eps, std::shared_ptr<Transport> t, DialDone d)
      : strand(asio::make_strand(ex)), resolver(strand), socket(strand), timer(strand),
        candidates(std::move(eps)), transport(std::move(t)), done(std::move(d)) {}

  void start(std::chrono::milliseconds timeout) {
    timer.expires_after(timeout);
    timer.async_wait([self = shared_from_this(), timeout](std::error_code ec) {
      if (ec || self->finished) return;
      self->fail(Errc::timeout, "no connection within " + ms(timeout), self->answered);
    });
    resolve_next();
  }

  // Candidates are resolved one after another; a name that does not resolve is
  // skipped while another candidate remains.
  void resolve_next() {
    if (resolved_count == candidates.size()) {
      if (addresses.empty()) {
        unresolved = true;
        return fail(Errc::connect, resolve_error.empty() ? "no address to dial" : "cannot resolve: " + resolve_error);
      }
      return connect();
    }
    const Endpoint& next = candidates[resolved_count++];
    resolver.async_resolve(next.host, std::to_string(next.port),
                           [self = shared_from_this()](std::error_code ec, auto results) {
                             if (self->finished) return;
                             if (ec) self->resolve_error = ec.message();
                             for (const auto& entry : results) self->addresses.push_back(entry.endpoint());
                             self->resolve_next();
                           });
  }

  void connect() {
    asio::async_connect(socket, addresses, [self = shared_from_this()](std::error_code ec, const auto&) {
      if (self->finished) return;
      // Out of descriptors or buffers is this process's trouble, not the far end's: say so (Errc::system).
      if (ec == std::errc::too_many_files_open || ec == std::errc::too_many_files_open_in_system ||
          ec == std::errc::no_buffer_space || ec == std::errc::not_enough_memory)
        return self->fail(Errc::system, "out of local resources: " + ec.message());
      if (ec) return self->fail(Errc::connect, ec.message());
      // Dialing a port of this host that nothing listens on, the kernel may pick that very
      // port as the source: TCP's simultaneous open then connects the socket to itself, and
      // it holds the port a listener started again there needs (seen: a restarted master
      // could not bind while its peers redialed it). Nothing listened: a refused dial.
      std::error_code local_ec, remote_ec;
      const auto local = self->socket.local_endpoint(local_ec);
      const auto remote = self->socket.remote_endpoint(remote_ec);
      if (!local_ec && !remote_ec && local == remote) {
        // Closed with a reset: a graceful close would leave the port in TIME_WAIT for a
        // minute, and this socket has no SO_REUSEADDR to let a listener share it.
        std::error_code ignored;
        self->socket.set_option(asio::socket_base::linger(true, 0), ignored);
        return self->fail(Errc::connect, "the socket connected to itself: nothing listens there");
      }
      self->answered = true;
      if (Status tuned = apply_tuning(self->socket, self->tuning); !tuned.ok())
        return self->fail(tuned.code, tuned.message, true);
      self->transport->open_client(std::move(self->socket),
                                   [self](Status st, std::shared_ptr<Stream> stream) {
                                     asio::dispatch(self->strand, [self, st, stream] {
                                       if (self->finished) {
                                         if (stream) stream->close();
                                         return;
                                       }
                                       self->finished = true;
                                       self->timer.cancel();
                                       if (!st.ok()) return self->done({st, nullptr, true});
                                       self->done({Status::success(), stream, true});
                                     });
                                   });
    });
  }

  void fail(Errc code, const std::string& why, bool got_answer = false) {
    finished = true;
    timer.cancel();
    resolver.cancel();
    std::error_code ignored;
    socket.close(ignored);
    std::string where;
    for (const Endpoint& e : candidates) where += (where.empty() ? "" : " or ") + e.to_string();
    done({Status::failure(code, "cannot connect to " + where + ": " + why), nullptr, got_answer, !unresolved});
  }

  asio::strand<asio::any_io_executor> strand;
  asio::ip::tcp::resolver resolver;
  asio::ip::tcp::socket socket;
  asio::steady_timer timer;
  std::vector<Endpoint> candidates;
  size_t resolved_count = 0;
  std::vector<asio::ip::tcp::endpoint> addresses;
  std::string resolve_error;
  std::shared_ptr<Transport> transport;
  DialDone done;
  SocketTuning tuning;
  bool answered = false;  // the TCP connection was taken: only the transport's handshake is left
  bool finished = false;
  bool unresolved = false;  // no candidate's name resolved
};

void start_dial(asio::any_io_executor executor, std::vector<Endpoint> candidates, std::chrono::milliseconds timeout,
                std::shared_ptr<Transport> transport, DialDone done, SocketTuning tuning) {
  auto attempt = std::make_shared<DialAttempt>(executor, std::move(candidates), std::move(transport), std::move(done));
  attempt->tuning = std::move(tuning);
  asio::dispatch(attempt->strand, [attempt, timeout] { attempt->start(timeout); });
}

}  // namespace

void dial(asio::any_io_executor executor, const Endpoint& endpoint, std::chrono::milliseconds timeout,
          std::shared_ptr<Transport> transport, StreamReady done, SocketTuning tuning) {
  dial(std::move(executor), std::vector<Endpoint>{endpoint}, timeout, std::move(transport), std::move(done),
       std::move(tuning));
}

void dial(asio::any_io_executor executor, std::vector<Endpoint> candidates, std::chrono::milliseconds timeout,
          std::shared_ptr<Transport> transport, StreamReady done, SocketTuning tuning) {
  start_dial(std::move(executor), std::move(candidates), timeout, std::move(transport),
             [done = std::move(done)](DialOutcome outcome) { done(outcome.status, std::move(outcome.stream)); },
             std::move(tuning));
}

void dial(asio::any_io_executor executor, const Endpoint& endpoint, std::chrono::milliseconds timeout,
          std::shared_ptr<Transport> transport, DialDone done, SocketTuning tuning) {
  start_dial(std::move(executor), {endpoint}, timeout, std::move(transport), std::move(done), std::move(tuning));
}

}  // namespace ferry::net
