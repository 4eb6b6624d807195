#include "net/tls_transport.h"

#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include "core/duration_text.h"
#include "net/socket_options.h"
#include "net/tls_context.h"
#include "net/tls_stream.h"

namespace ferry::net {
namespace {

// One handshake, on the stream's strand: TLS, then the acceptor's one byte
// (see tls_transport.h), all under one deadline. `ready` runs once.
class TlsHandshake : public std::enable_shared_from_this<TlsHandshake> {
 public:
  TlsHandshake(std::shared_ptr<TlsStream> stream, bool server, std::chrono::milliseconds timeout, StreamReady ready)
      : stream_(std::move(stream)), server_(server), timeout_(timeout), timer_(stream_->executor()),
        ready_(std::move(ready)) {}

  void start() {
    timer_.expires_after(timeout_);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->finished_) return;
      self->finish(Status::failure(Errc::timeout, "TLS handshake with " + self->stream_->remote_host() +
                                                      " did not finish within " + ms(self->timeout_)));
    });
    auto role = server_ ? asio::ssl::stream_base::server : asio::ssl::stream_base::client;
    stream_->ssl().async_handshake(role, [self = shared_from_this()](std::error_code ec) {
      if (self->finished_) return;
      if (ec) return self->fail(ec, "handshake");
      self->server_ ? self->confirm() : self->await_confirmation();
    });
  }

 private:
  // The acceptor verified the dialer: say so.
  void confirm() {
    byte_ = kTlsAcceptedByte;
    asio::async_write(stream_->ssl(), asio::buffer(&byte_, 1), [self = shared_from_this()](std::error_code ec, size_t) {
      if (self->finished_) return;
      if (ec) return self->fail(ec, "handshake");
      self->finish(Status::success());
    });
  }

  // In TLS 1.3 the dialer is done before the acceptor checked its certificate: wait for the verdict.
  void await_confirmation() {
    asio::async_read(stream_->ssl(), asio::buffer(&byte_, 1), [self = shared_from_this()](std::error_code ec, size_t) {
      if (self->finished_) return;
      if (ec) return self->fail(ec, "handshake (awaiting acceptance)");
      if (self->byte_ != kTlsAcceptedByte)
        return self->finish(Status::failure(Errc::connect, "TLS handshake: the other side is not a ferry TLS endpoint"));
      self->finish(Status::success());
    });
  }

  void fail(const std::error_code& ec, const char* during) {
    Status st = tls_handshake_failure(ec, stream_->ssl().native_handle(), during);
    st.message += " (" + stream_->remote_host() + ")";
    finish(std::move(st));
  }

  void finish(Status st) {
    finished_ = true;
    timer_.cancel();
    if (!st.ok()) {
      stream_->close();
      return ready_(std::move(st), nullptr);
    }
    ready_(Status::success(), stream_);
  }

  std::shared_ptr<TlsStream> stream_;
  const bool server_;
  const std::chrono::milliseconds timeout_;
  asio::steady_timer timer_;
  StreamReady ready_;
  bool finished_ = false;
  uint8_t byte_ = 0;
};

class TlsTransport final : public Transport {
 public:
  explicit TlsTransport(const TlsConfig& config)
      : context_(make_tls_context(config)), timeout_(config.handshake_timeout), can_dial_(!config.ca_file.empty()) {}

  std::string name() const override { return "tls"; }
  void open_client(asio::ip::tcp::socket socket, StreamReady ready) override {
    if (!can_dial_) {  // a dialer that verifies nobody would talk to anyone
      auto executor = socket.get_executor();
      return asio::post(executor, [ready = std::move(ready)] {
        ready(Status::failure(Errc::invalid_usage, "TLS: a transport without ca_file only accepts"), nullptr);
      });
    }
    open(std::move(socket), false, std::move(ready));
  }
  void open_server(asio::ip::tcp::socket socket, StreamReady ready) override {
    open(std::move(socket), true, std::move(ready));
  }

 private:
  void open(asio::ip::tcp::socket socket, bool server, StreamReady ready) {
    apply_socket_options(socket);
    auto stream = std::make_shared<TlsStream>(std::move(socket), context_);
    auto handshake = std::make_shared<TlsHandshake>(stream, server, timeout_, std::move(ready));
    asio::post(stream->executor(), [handshake] { handshake->start(); });
  }

  std::shared_ptr<asio::ssl::context> context_;
  std::chrono::milliseconds timeout_;
  bool can_dial_;
};

}  // namespace

std::shared_ptr<Transport> make_tls_transport(const TlsConfig& config) {
  return std::make_shared<TlsTransport>(config);
}

}  // namespace ferry::net
