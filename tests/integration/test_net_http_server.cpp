// The read-only HTTP server (net/http_server.h) over real loopback sockets:
// what a scraper and a browser get, and what garbage, oversized heads,
// stalled heads, crowds of idle connections and clients that never read get
// instead, while other clients keep being served. Small limits (a few hundred
// milliseconds) keep it quick; the bounds asserted on elapsed time are the
// deadlines' own (never earlier than set) plus wide slack (later).
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "net/http_server.h"
#include "stranger_crowd.h"

using namespace ferry;
using namespace std::chrono_literals;
using namespace std::string_literals;
using Clock = std::chrono::steady_clock;

namespace {

bool send_all(int fd, std::string_view bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 2000) != 1) return false;
  }
  return true;
}

// Reads until the far side closes (or resets) or `timeout` passes.
std::string read_until_closed(int fd, std::chrono::milliseconds timeout, bool& closed) {
  std::string bytes;
  closed = false;
  auto deadline = Clock::now() + timeout;
  char buffer[65536];
  while (Clock::now() < deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) != 1) continue;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      bytes.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      closed = true;
      break;
    }
  }
  return bytes;
}

struct Reply {
  bool closed = false;  // the server closed the connection after it
  int status = 0;       // 0: no status line came
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

Reply parse_reply(const std::string& raw, bool closed) {
  Reply reply;
  reply.closed = closed;
  size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || end == std::string::npos) return reply;
  reply.status = std::stoi(raw.substr(9, 3));
  size_t pos = raw.find("\r\n") + 2;
  while (pos < end) {
    size_t eol = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, eol - pos);
    size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    pos = eol + 2;
  }
  reply.body = raw.substr(end + 4);
  return reply;
}

int connect_to(uint16_t port, const char* source = "127.0.0.1") {
  int fd = test::connect_from(source, port, 2000ms);
  REQUIRE(fd >= 0);
  return fd;
}

// One request on a fresh connection; the reply as it stands when the server closed (or after 5 s).
Reply fetch(uint16_t port, std::string_view request, const char* source = "127.0.0.1") {
  int fd = connect_to(port, source);
  REQUIRE(send_all(fd, request));
  bool closed = false;
  std::string raw = read_until_closed(fd, 5000ms, closed);
  ::close(fd);
  return parse_reply(raw, closed);
}

std::string get(std::string_view target, std::string_view method = "GET") {
  return std::string(method) + " " + std::string(target) + " HTTP/1.1\r\nHost: test\r\nUser-Agent: t\r\n\r\n";
}

// Answers /metrics and /big (size given), 404 elsewhere; remembers the paths it saw.
struct Site {
  std::mutex mu;
  std::vector<std::string> paths;  // guarded by mu
  size_t big_bytes = 16u << 20;

  net::HttpHandler handler() {
    return [this](std::string_view path) {
      {
        std::lock_guard lock(mu);
        paths.emplace_back(path);
      }
      if (path == "/metrics") return net::HttpResponse{200, "text/plain; version=0.0.4", "ferry_peers 3\n"};
      if (path == "/big") return net::HttpResponse{200, "application/octet-stream", std::string(big_bytes, 'x')};
      if (path == "/throw") throw std::runtime_error("handler bug");
      return net::HttpResponse{404, "text/plain", "no such page\n"};
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard lock(mu);
    return paths;
  }
};

net::HttpLimits quick_limits() {
  net::HttpLimits limits;
  limits.head_timeout = 300ms;
  limits.write_timeout = 300ms;
  return limits;
}

template <class Predicate>
bool eventually(Predicate predicate, std::chrono::milliseconds within = 5000ms) {
  auto deadline = Clock::now() + within;
  while (Clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return predicate();
}

}  // namespace

TEST_CASE("http server: GET gets the handler's page with its status and headers, HEAD the headers alone",
          "[net][http]") {
  Site site;
  net::HttpServer server("127.0.0.1:0", site.handler());
  server.start();

  Reply reply = fetch(server.port(), get("/metrics?name[]=x&y=%20"));
  CHECK(reply.closed);
  CHECK(reply.status == 200);
  CHECK(reply.body == "ferry_peers 3\n");
  CHECK(reply.headers["content-length"] == "14");
  CHECK(reply.headers["content-type"] == "text/plain; version=0.0.4");
  CHECK(reply.headers["cache-control"] == "no-store");
  CHECK(reply.headers["x-content-type-options"] == "nosniff");
  CHECK(reply.headers["connection"] == "close");
  CHECK(reply.headers.count("date") == 1);

  Reply head = fetch(server.port(), get("/metrics", "HEAD"));
  CHECK(head.closed);
  CHECK(head.status == 200);
  CHECK(head.headers["content-length"] == "14");
  CHECK(head.body.empty());

  Reply missing = fetch(server.port(), get("/nothing#here"));
  CHECK(missing.status == 404);
  CHECK(missing.body == "no such page\n");

  // HTTP/1.0 needs no Host; an absolute-form target names the same path; bare LF line ends are taken.
  CHECK(fetch(server.port(), "GET /metrics HTTP/1.0\r\n\r\n").status == 200);
  CHECK(fetch(server.port(), "GET http://test:9100/metrics?x HTTP/1.1\r\nHost: test:9100\r\n\r\n").status == 200);
  CHECK(fetch(server.port(), "GET /metrics HTTP/1.1\nHost: a\n\n").status == 200);

  CHECK(site.seen() == std::vector<std::string>{"/metrics", "/metrics", "/nothing", "/metrics", "/metrics", "/metrics"});
  CHECK(eventually([&] { return server.open_connections() == 0; }));
}

TEST_CASE("http server: another method gets a 405 with Allow, a malformed head a 400, and each is closed",
          "[net][http]") {
  Site site;
  net::HttpServer server("127.0.0.1:0", site.handler(), quick_limits());
  server.start();

  Reply post = fetch(server.port(), "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
  CHECK(post.closed);
  CHECK(post.status == 405);
  CHECK(post.headers["allow"] == "GET, HEAD");
  CHECK(post.headers["connection"] == "close");

  // A body it never reads is drained after the answer, so no reset destroys the answer on its way.
  std::string upload = "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 524288\r\n\r\n" + std::string(524288, 'u');
  Reply big_post = fetch(server.port(), upload);
  CHECK(big_post.closed);
  CHECK(big_post.status == 405);
  CHECK(big_post.body == "Method Not Allowed\n");

  struct Case {
    const char* name;
    std::string request;
    int status;
  };
  for (const Case& c : {Case{"words, not a request", "hello there, server\r\n\r\n", 400},
                        Case{"TLS hello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"s, 400},
                        Case{"relative target", "GET metrics HTTP/1.1\r\nHost: a\r\n\r\n", 400},
                        Case{"no Host in 1.1", "GET /metrics HTTP/1.1\r\n\r\n", 400},
                        Case{"two Hosts", "GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
                        Case{"space before colon", "GET /metrics HTTP/1.1\r\nHost : a\r\n\r\n", 400},
                        Case{"folded header", "GET /metrics HTTP/1.1\r\nHost: a\r\n b\r\n\r\n", 400},
                        Case{"control byte", "GET /metrics HTTP/1.1\r\nHost: a\x01\r\n\r\n", 400},
                        Case{"NUL", "GET /metrics HTTP/1.1\r\nHost: a\0\r\n\r\n"s, 400},
                        Case{"double space", "GET  /metrics HTTP/1.1\r\nHost: a\r\n\r\n", 400},
                        Case{"HTTP/2", "GET /metrics HTTP/2.0\r\nHost: a\r\n\r\n", 505}}) {
    INFO(c.name);
    Reply reply = fetch(server.port(), c.request);
    CHECK(reply.status == c.status);
    CHECK(reply.closed);
    CHECK(reply.headers["connection"] == "close");
  }
  CHECK(site.seen().empty());
}

TEST_CASE("http server: a head over max_head_bytes gets a 431, junk with no line end is closed at the limit",
          "[net][http]") {
  Site site;
  net::HttpLimits limits = quick_limits();
  limits.max_head_bytes = 1024;
  net::HttpServer server("127.0.0.1:0", site.handler(), limits);
  server.start();

  std::string huge = "GET /metrics HTTP/1.1\r\nHost: a\r\n";
  while (huge.size() < 4096) huge += "X-Padding: " + std::string(100, 'p') + "\r\n";
  huge += "\r\n";
  Reply too_large = fetch(server.port(), huge);
  CHECK(too_large.closed);
  CHECK(too_large.status == 431);

  // Binary junk that never ends a line: closed once the limit is full (a 400 on the way, not a wait for the deadline).
  std::string junk(limits.max_head_bytes + 512, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>(0x80 + i % 64);
  auto start = Clock::now();
  Reply refused = fetch(server.port(), junk);
  CHECK(refused.closed);
  CHECK(refused.status == 400);
  CHECK(Clock::now() - start < limits.head_timeout);
  CHECK(site.seen().empty());
}

TEST_CASE("http server: a client that stalls in its head is closed at head_timeout while others are served",
          "[net][http]") {
  Site site;
  net::HttpLimits limits = quick_limits();
  net::HttpServer server("127.0.0.1:0", site.handler(), limits);
  server.start();

  int stalled = connect_to(server.port());
  auto stalled_at = Clock::now();
  REQUIRE(send_all(stalled, "GET /metrics HTTP/1.1\r\nHost: a\r\nX-Slow: "));

  Reply other = fetch(server.port(), get("/metrics"));
  CHECK(other.status == 200);
  bool stalled_closed = false;
  read_until_closed(stalled, 0ms, stalled_closed);
  CHECK_FALSE(stalled_closed);  // the other was served while the stalled one was still held

  std::string rest = read_until_closed(stalled, 5000ms, stalled_closed);
  auto held = Clock::now() - stalled_at;
  CHECK(stalled_closed);
  CHECK(rest.empty());  // no response: the deadline closes it without a word
  CHECK(held >= limits.head_timeout - 20ms);
  CHECK(held < limits.head_timeout + 3000ms);
  ::close(stalled);
  CHECK(eventually([&] { return server.open_connections() == 0; }));
  CHECK(site.seen() == std::vector<std::string>{"/metrics"});
}

TEST_CASE("http server: thousands of idle connections never hold more than the cap, and a GET still gets through",
          "[net][http]") {
  test::raise_own_fd_limit();
  Site site;
  net::HttpLimits limits = quick_limits();
  limits.max_connections = 64;
  limits.max_connections_per_source = 32;
  net::HttpServer server("127.0.0.1:0", site.handler(), limits);
  server.start();

  std::atomic<bool> sampling{true};
  std::atomic<size_t> most{0};
  std::thread sampler([&] {
    while (sampling) {
      size_t now = server.open_connections();
      if (now > most) most = now;
      std::this_thread::sleep_for(200us);
    }
  });

  // Idle connections need two descriptors each here (both ends live in this process).
  rlimit fds{};
  ::getrlimit(RLIMIT_NOFILE, &fds);
  const size_t crowd_size = std::min<size_t>(2000, fds.rlim_cur > 400 ? (fds.rlim_cur - 300) / 2 : 50);
  {
    // From another source: the per-source cap leaves the places it cannot take to everyone else, at once.
    test::StrangerCrowd crowd;
    CHECK(crowd.arrive(crowd_size, "127.0.0.2", server.port()) > crowd_size / 2);
    Reply reply = fetch(server.port(), get("/metrics"));
    CHECK(reply.status == 200);
    CHECK(crowd.still_open() <= limits.max_connections_per_source);
  }
  {
    // From the scraper's own source: every place taken, and the GET gets one once the idle time out.
    test::StrangerCrowd crowd;
    crowd.arrive(crowd_size, "127.0.0.1", server.port());
    Reply reply;
    CHECK(eventually(
        [&] {
          reply = fetch(server.port(), get("/metrics"));
          return reply.status == 200;
        },
        10000ms));
    CHECK(reply.body == "ferry_peers 3\n");
  }
  CHECK(eventually([&] { return server.open_connections() == 0; }));
  sampling = false;
  sampler.join();
  CHECK(most.load() <= limits.max_connections);
  CHECK(most.load() >= limits.max_connections_per_source);  // the crowd did fill it
}

TEST_CASE("http server: a client that never reads a large response is cut off at write_timeout", "[net][http]") {
  Site site;
  net::HttpLimits limits = quick_limits();
  net::HttpServer server("127.0.0.1:0", site.handler(), limits);
  server.start();

  int sink = connect_to(server.port());
  auto asked_at = Clock::now();
  REQUIRE(send_all(sink, get("/big")));
  REQUIRE(eventually([&] { return site.seen().size() == 1; }));

  // Others are served while 16 MiB wait for the sink.
  Reply other = fetch(server.port(), get("/metrics"));
  CHECK(other.status == 200);
  CHECK(server.open_connections() >= 1);

  CHECK(eventually([&] { return server.open_connections() == 0; }));
  auto held = Clock::now() - asked_at;
  CHECK(held >= limits.write_timeout - 20ms);
  CHECK(held < limits.write_timeout + 3000ms);

  // The sink finds its connection reset after at most what the socket buffers held: not the whole page.
  bool closed = false;
  std::string got = read_until_closed(sink, 5000ms, closed);
  CHECK(closed);
  CHECK(got.size() < site.big_bytes);
  ::close(sink);
}

TEST_CASE("http server: stop() closes open connections at once, and a throwing handler gives a 500", "[net][http]") {
  Site site;
  net::HttpServer server("127.0.0.1:0", site.handler());  // default deadlines: seconds, which stop() must not wait for
  server.start();

  Reply thrown = fetch(server.port(), get("/throw"));
  CHECK(thrown.status == 500);
  CHECK(thrown.closed);

  test::StrangerCrowd idle;
  CHECK(idle.arrive(20, "127.0.0.1", server.port(), {'G', 'E', 'T'}) == 20);
  int sink = connect_to(server.port());
  REQUIRE(send_all(sink, get("/big")));
  REQUIRE(eventually([&] { return server.open_connections() == 21; }));

  auto start = Clock::now();
  server.stop();
  CHECK(Clock::now() - start < 1000ms);
  CHECK(server.open_connections() == 0);
  CHECK(eventually([&] { return idle.still_open() == 0; }));
  server.stop();  // idempotent

  // The port is free again.
  const uint16_t port = server.port();
  net::HttpServer again("127.0.0.1:" + std::to_string(port), site.handler());
  CHECK(again.port() == port);
  ::close(sink);
}

TEST_CASE("http server: handler answers it cannot send become 500s, and a handler may not stop its server",
          "[net][http]") {
  net::HttpServer* self = nullptr;
  net::HttpServer server("127.0.0.1:0", [&](std::string_view path) {
    if (path == "/status-99") return net::HttpResponse{99, "", "x"};
    if (path == "/status-204") return net::HttpResponse{204, "", ""};
    if (path == "/header-injection") return net::HttpResponse{200, "text/plain\r\nSet-Cookie: a=b", "x"};
    if (path == "/stop") self->stop();
    return net::HttpResponse{200, "", "fine"};
  });
  self = &server;
  server.start();
  for (const char* path : {"/status-99", "/status-204", "/header-injection", "/stop"}) {
    INFO(path);
    Reply reply = fetch(server.port(), get(path));
    CHECK(reply.status == 500);
    CHECK(reply.headers.count("set-cookie") == 0);
  }
  Reply fine = fetch(server.port(), get("/"));
  CHECK(fine.status == 200);
  CHECK(fine.headers["content-type"] == "text/plain; charset=utf-8");
  CHECK_THROWS_AS(server.start(), Error);
}

TEST_CASE("http server: addresses as users write them, a bare port is loopback, a taken port is Errc::connect",
          "[net][http][address]") {
  auto handler = [](std::string_view) { return net::HttpResponse{}; };
  for (const char* bare : {"0", ":0"}) {
    INFO(bare);
    net::HttpServer server(bare, handler);
    CHECK(server.address() == "127.0.0.1:" + std::to_string(server.port()));
  }
  {
    net::HttpServer all("0.0.0.0:0", handler);
    CHECK(all.address() == "0.0.0.0:" + std::to_string(all.port()));
    all.start();
    CHECK(fetch(all.port(), get("/")).status == 200);
  }
  try {
    net::HttpServer v6("[::1]:0", handler);
    CHECK(v6.address() == "[::1]:" + std::to_string(v6.port()));
  } catch (const Error& e) {
    WARN("no IPv6 loopback here: " << e.what());
  }
  for (const char* bad : {"", "localhost", "1.2.3.4:99999", "::1:80", ":", "70000", "[::1]"}) {
    INFO(bad);
    try {
      net::HttpServer server(bad, handler);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.code() == Errc::invalid_argument);
    }
  }
  net::HttpServer first("127.0.0.1:0", handler);
  try {
    net::HttpServer second("127.0.0.1:" + std::to_string(first.port()), handler);
    FAIL("bound a taken port");
  } catch (const Error& e) {
    CHECK(e.code() == Errc::connect);
  }
}
