#include "net/http_server.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <limits>

#include <asio/buffer.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/log_throttle.h"
#include "net/endpoint.h"
#include "net/fd_limit.h"
#include "net/http_request.h"
#include "net/listener.h"
#include "net/remote_host.h"
#include "net/stranger_gate.h"

namespace ferry::net {

// After the response is written the connection half-closes and reads until
// the client closes, so that bytes it sent beyond the head (a body, junk) do
// not make the kernel answer with a reset that can destroy the response on
// its way (RFC 9112 section 9.6). One second covers a client a few round
// trips away on another continent; one that never closes holds its place no
// longer, and it may send at most kLingerBytes meanwhile.
constexpr std::chrono::milliseconds kLingerTimeout{1000};
constexpr size_t kLingerBytes = size_t{1} << 20;

struct HttpServerState {
  HttpHandler handler;
  HttpLimits limits;
  LogThrottle bad_request_log;
  LogThrottle timeout_log;
};

namespace {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 410: return "Gone";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "";  // a reason phrase may be empty (RFC 9112 section 4)
  }
}

// 1xx, 204 and 304 cannot carry the body (and Content-Length) every response of this server has.
bool sendable_status(int status) { return status >= 200 && status <= 599 && status != 204 && status != 304; }

bool header_safe(std::string_view value) {
  return std::none_of(value.begin(), value.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f; });
}

HttpResponse plain_error(int status) {
  return {status, "text/plain; charset=utf-8", std::string(reason_phrase(status)) + "\n"};
}

std::string http_date() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[64];
  size_t n = std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return std::string(text, n);
}

std::string response_head(const HttpResponse& response) {
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + std::string(reason_phrase(response.status));
  head += "\r\nDate: " + http_date();
  head += "\r\nContent-Type: " +
          (response.content_type.empty() ? std::string("text/plain; charset=utf-8") : response.content_type);
  head += "\r\nContent-Length: " + std::to_string(response.body.size());
  head += "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff";
  if (response.status == 405) head += "\r\nAllow: GET, HEAD";
  head += "\r\nConnection: close\r\n\r\n";
  return head;
}

// One client, one request, one response, then closed. Lives as long as an
// operation of its own is pending (each holds it); everything runs on the
// server's thread. Moves forward only: head, respond, linger, closed.
class HttpConnection : public std::enable_shared_from_this<HttpConnection> {
 public:
  HttpConnection(asio::ip::tcp::socket socket, std::shared_ptr<StrangerGate::Pass> pass,
                 std::shared_ptr<HttpServerState> state)
      : pass_(std::move(pass)),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        state_(std::move(state)),
        source_(remote_host_of(socket_)) {}

  void start() {
    in_.resize(state_->limits.max_head_bytes);
    arm(state_->limits.head_timeout, "send their request head", true);
    read_head();
  }

 private:
  // One deadline per phase; the generation tells a timer that fired from one
  // re-armed for a later phase whose handler was already queued. abortive:
  // see close().
  void arm(std::chrono::milliseconds after, const char* what, bool abortive) {
    uint64_t generation = ++deadline_generation_;
    deadline_.expires_after(after);
    deadline_.async_wait([self = shared_from_this(), generation, what, after, abortive](std::error_code ec) {
      if (ec || generation != self->deadline_generation_ || !self->socket_.is_open()) return;
      if (uint64_t events = self->state_->timeout_log.admit())
        log().info("http: closed {} connection(s) that did not {} within {} ms (last from {})", events, what,
                   after.count(), self->source_);
      self->close(abortive);
    });
  }

  void read_head() {
    socket_.async_read_some(asio::buffer(in_.data() + used_, in_.size() - used_),
                            [self = shared_from_this()](std::error_code ec, size_t n) { self->on_read(ec, n); });
  }

  void on_read(std::error_code ec, size_t n) {
    if (ec) return close(false);  // gone, or closed by a deadline or stop
    size_t scanned = used_ >= 3 ? used_ - 3 : 0;
    used_ += n;
    std::string_view bytes(in_.data(), used_);
    if (size_t end = http_head_end(bytes, scanned); end != std::string_view::npos) {
      HttpRequestHead head = parse_http_request_head(bytes.substr(0, end));
      if (head.error_status != 0) return refuse(head.error_status, head.error);
      return respond(call_handler(head.path), head.head_only);
    }
    if (used_ == in_.size()) {
      if (http_request_line_complete(bytes))
        return refuse(431, "head over " + std::to_string(in_.size()) + " bytes");
      return refuse(400, "no request line in the first " + std::to_string(in_.size()) + " bytes");
    }
    read_head();
  }

  void refuse(int status, const std::string& why) {
    if (uint64_t events = state_->bad_request_log.admit())
      log().info("http: answered {} bad request(s) (last from {}: {}, answered {})", events, source_, why, status);
    respond(plain_error(status), false);
  }

  HttpResponse call_handler(const std::string& path) {
    try {
      HttpResponse response = state_->handler(path);
      if (sendable_status(response.status) && header_safe(response.content_type)) return response;
      log().debug("http: the handler for {} answered status {} / content type '{}': sent a 500 instead", path,
                  response.status, response.content_type);
    } catch (const std::exception& e) {
      log().debug("http: the handler for {} threw: {}", path, e.what());
    } catch (...) {
      log().debug("http: the handler for {} threw", path);
    }
    return plain_error(500);
  }

  void respond(HttpResponse response, bool head_only) {
    out_head_ = response_head(response);
    if (!head_only) out_body_ = std::move(response.body);
    arm(state_->limits.write_timeout, "read their response", true);
    std::array<asio::const_buffer, 2> buffers{asio::buffer(out_head_), asio::buffer(out_body_)};
    asio::async_write(socket_, buffers, [self = shared_from_this()](std::error_code ec, size_t) {
      if (ec) return self->close(false);
      self->out_head_ = {};
      self->out_body_ = {};
      self->linger();
    });
  }

  void linger() {
    std::error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_send, ignored);
    // Not abortive: the response was taken, and a reset could still destroy
    // the part of it that is on its way.
    arm(kLingerTimeout, "close after their response", false);
    used_ = 0;
    drain();
  }

  void drain() {
    socket_.async_read_some(asio::buffer(in_), [self = shared_from_this()](std::error_code ec, size_t n) {
      self->used_ += n;
      if (ec || self->used_ > kLingerBytes) return self->close(false);
      self->drain();
    });
  }

  // reset: a client missed its deadline; an abortive close frees what the
  // kernel still holds for one that stopped reading, instead of keeping it
  // for minutes.
  void close(bool reset) {
    if (!socket_.is_open()) return;
    std::error_code ignored;
    if (reset) socket_.set_option(asio::socket_base::linger(true, 0), ignored);
    socket_.close(ignored);
    deadline_.cancel();
    pass_->release();  // after the socket: open_connections() never counts below what is open
  }

  std::shared_ptr<StrangerGate::Pass> pass_;
  asio::ip::tcp::socket socket_;
  asio::steady_timer deadline_;
  uint64_t deadline_generation_ = 0;
  std::shared_ptr<HttpServerState> state_;
  std::string source_;    // for log lines
  std::string in_;        // the request head as it arrives (max_head_bytes), later the drain buffer
  size_t used_ = 0;       // bytes of in_ filled (while lingering: bytes drained)
  std::string out_head_;  // the response, kept until written
  std::string out_body_;
};

uint32_t to_cap(size_t value) {
  return static_cast<uint32_t>(std::min<size_t>(value, std::numeric_limits<uint32_t>::max()));
}

}  // namespace

HttpServer::HttpServer(const std::string& address, HttpHandler handler, HttpLimits limits) {
  if (!handler) throw Error(Errc::invalid_argument, "http: no handler");
  if (limits.max_connections == 0 || limits.max_connections_per_source == 0 || limits.max_head_bytes < 64 ||
      limits.head_timeout.count() <= 0 || limits.write_timeout.count() <= 0)
    throw Error(Errc::invalid_argument,
                "http: limits must be positive (and max_head_bytes at least 64, room for a request line)");
  std::string error;
  auto endpoint = parse_listen_endpoint(address, &error);
  if (!endpoint) throw Error(Errc::invalid_argument, "http: " + error);
  // Each client costs a descriptor; a distro's soft limit of 1024 would be the real cap otherwise.
  raise_fd_limit();
  io_ = std::make_unique<asio::io_context>(1);
  listener_ = Listener::bind(io_->get_executor(), endpoint->host, endpoint->port, endpoint->port);
  port_ = listener_->port();
  address_ = Endpoint{listener_->address().to_string(), port_}.to_string();
  StrangerLimits caps;
  caps.total = to_cap(limits.max_connections);
  caps.per_source = to_cap(std::min(limits.max_connections_per_source, limits.max_connections));
  gate_ = StrangerGate::create("http", caps, "open");
  state_ = std::make_shared<HttpServerState>();
  state_->handler = std::move(handler);
  state_->limits = limits;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  std::lock_guard lock(lifecycle_mu_);
  if (started_ || stopped_) throw Error(Errc::invalid_usage, "http: start() once, before stop()");
  started_ = true;
  listener_->start(gate_, [state = state_](asio::ip::tcp::socket socket, std::shared_ptr<StrangerGate::Pass> pass) {
    std::make_shared<HttpConnection>(std::move(socket), std::move(pass), state)->start();
  });
  thread_ = std::thread([this, io = io_.get()] {
    server_thread_ = std::this_thread::get_id();
    // A handler that escapes (out of memory building a response) costs that
    // connection, not the server.
    while (true) {
      try {
        io->run();
        return;
      } catch (const std::exception& e) {
        log().error("http: {}", e.what());
      }
    }
  });
}

void HttpServer::stop() {
  if (std::this_thread::get_id() == server_thread_.load())
    throw Error(Errc::invalid_usage, "http: stop() from the server's own thread (a handler) would wait for itself");
  std::lock_guard lock(lifecycle_mu_);
  if (stopped_) return;
  stopped_ = true;
  io_->stop();
  if (thread_.joinable()) thread_.join();
  // Destroying the io_context destroys every pending operation, and with it
  // the last reference to each connection and to the listener: their sockets
  // close here, the port is free when stop() returns.
  listener_.reset();
  io_.reset();
}

size_t HttpServer::open_connections() const { return gate_->strangers(); }

}  // namespace ferry::net
