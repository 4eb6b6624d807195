// A small read-only HTTP/1.x server for a process's own pages (the master's
// /metrics, /status and dashboard): GET and HEAD, one request per connection,
// every response closes its connection. Built to sit on a network that holds
// strangers without costing the process that serves it: every connection has
// a deadline for its request head and one for its response, the number of
// connections (in total and per source) is capped, and every buffer is
// bounded (the head by max_head_bytes; the response by what the handler
// returns). Garbage gets a 400, an oversized head a 431, another method a
// 405, and the connection is closed; refusals are logged at most once a
// second.
//
// Threading: the server runs one thread of its own (from start() to stop()),
// which accepts, parses, calls the handler and writes. Nothing runs on the
// caller's threads. port(), address() and open_connections() may be called
// from any thread; start() and stop() from any thread but the server's own
// (a handler that calls stop() would wait for itself: it throws
// Errc::invalid_usage instead).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace asio {
class io_context;
}

namespace ferry::net {

class Listener;
class StrangerGate;
struct HttpServerState;

struct HttpResponse {
  int status = 200;          // 200..599; anything else is answered as a 500
  std::string content_type;  // empty: "text/plain; charset=utf-8"; must not hold control bytes (else a 500)
  std::string body;          // sent as is (not for HEAD); its size is the handler's to bound
};

// Called on the server's thread for each complete GET or HEAD request, with
// the target's path (as sent, not percent-decoded, without "?query"). For
// HEAD the body is computed and dropped: Content-Length stays true. It must
// be quick (it holds up every other client) and should not throw: an
// exception becomes a 500 and a debug line.
using HttpHandler = std::function<HttpResponse(std::string_view path)>;

struct HttpLimits {
  // Connections open at once; a new one beyond either cap is closed at once,
  // before any read. The per-source cap (an IPv6 source counts by its /64)
  // keeps one host from taking every place from the scraper and the browser.
  size_t max_connections = 64;
  size_t max_connections_per_source = 32;  // at most max_connections
  // Request line and headers; a head larger than this gets a 431 (or a 400
  // when not even the request line fits) and the connection is closed.
  // Prometheus sends about 300 bytes, a browser 1-2 KiB (this origin sets
  // no cookies): 8 KiB is nginx's line limit and leaves room.
  size_t max_head_bytes = 8192;
  // The whole request head must arrive within this of the accept
  // (slowloris). An honest client sends it in one round trip, under half a
  // second across the world.
  std::chrono::milliseconds head_timeout{5000};
  // The whole response must be taken within this; a client that does not
  // read is closed (with a reset, so the kernel drops what it holds too).
  // Room for a few MiB of /status at 1 MB/s.
  std::chrono::milliseconds write_timeout{10000};
};

class HttpServer {
 public:
  // Binds at once. `address` as users write it: "127.0.0.1:9100",
  // "[::1]:9100", "0.0.0.0:9100" or "[::]:9100" (all interfaces), and a bare
  // "9100" or ":9100" means loopback only; port 0 picks a free port. Throws
  // Error(Errc::invalid_argument) for a malformed address, a host that does
  // not resolve, a null handler, or limits of zero (max_head_bytes under
  // 64), Error(Errc::connect) when the port cannot be bound (taken, or not
  // ours to take). Serves nothing until start().
  HttpServer(const std::string& address, HttpHandler handler, HttpLimits limits = {});
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  // The bound address for a URL: "127.0.0.1:9100", "[::]:9100".
  std::string address() const { return address_; }

  // Starts the server's thread. Once; a second call, or one after stop(),
  // throws Error(Errc::invalid_usage).
  void start();
  // Stops accepting, closes every connection (a response being written is
  // cut off) and joins the thread: returns as soon as a handler running now
  // returns. Releases the port. Idempotent.
  void stop();

  // Connections open right now (accepted and not yet closed): never above
  // max_connections.
  size_t open_connections() const;

 private:
  std::mutex lifecycle_mu_;  // guards started_, stopped_, and serialises start()/stop()
  bool started_ = false;
  bool stopped_ = false;
  uint16_t port_ = 0;
  std::string address_;
  // Owned here; stop() destroys them (the io_context last), which closes
  // every socket that pending operations still hold.
  std::unique_ptr<asio::io_context> io_;
  std::shared_ptr<Listener> listener_;
  std::shared_ptr<StrangerGate> gate_;  // thread-safe; outlives the connections' passes
  std::shared_ptr<HttpServerState> state_;  // handler, limits, log throttles: touched on the server's thread only
  std::thread thread_;
  std::atomic<std::thread::id> server_thread_{};  // set by the thread itself: stop() refuses to run on it
};

}  // namespace ferry::net
