#include "chaos_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <stdexcept>
#include <string>

namespace ferry::chaos {

namespace {

constexpr std::size_t kReadBytes = 64 * 1024;
constexpr std::size_t kMaxQueued = 4 * 1024 * 1024;
constexpr int kPollMs = 50;

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Closing with SO_LINGER {1, 0} sends a RST instead of a FIN.
void close_with_reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

int dial_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

struct Counters {
  std::atomic<std::uint64_t> connections{0}, bytes{0}, resets{0}, corrupted{0};
};

// One relayed connection: the accepted client socket and the socket dialled to the target.
struct ChaosProxy::Relay {
  int client = -1, target = -1;
  std::atomic<bool> reset{false};       // end both directions now, with a RST
  std::atomic<bool> blackholed{false};  // drop everything from now on
  std::atomic<int> directions_left{2};
};

struct ChaosProxy::Route {
  std::uint16_t port = 0, target = 0;
  int listen_fd = -1;
  std::atomic<bool> closed{false};
  std::shared_ptr<Counters> counters;

  std::mutex mutex;  // guards everything below
  RouteShaping shaping;
  ProxyClock::time_point shaping_until{};
  int corrupt_pending = 0;
  std::mt19937_64 rng;
  std::vector<std::weak_ptr<Relay>> relays;
  int threads = 0;  // acceptor + relay directions still running
  std::condition_variable threads_done;

  RouteShaping current_shaping(ProxyClock::time_point now) {
    std::lock_guard lock(mutex);
    return now < shaping_until ? shaping : RouteShaping{};
  }
  // The offset of the byte to flip in a piece of `n` bytes, or -1.
  long take_corruption(std::size_t n) {
    std::lock_guard lock(mutex);
    if (corrupt_pending == 0 || n == 0) return -1;
    --corrupt_pending;
    return static_cast<long>(rng() % n);
  }
  std::vector<std::shared_ptr<Relay>> live_relays() {
    std::lock_guard lock(mutex);
    std::vector<std::shared_ptr<Relay>> out;
    std::erase_if(relays, [](const std::weak_ptr<Relay>& r) { return r.expired(); });
    for (auto& weak : relays)
      if (auto r = weak.lock(); r && !r->reset) out.push_back(r);
    return out;
  }
  void thread_ended() {
    std::lock_guard lock(mutex);
    if (--threads == 0) threads_done.notify_all();
  }
};

ChaosProxy::ChaosProxy(std::uint64_t seed) : seed_(seed), counters_(std::make_shared<Counters>()) {}

ChaosProxy::~ChaosProxy() {
  std::vector<std::uint16_t> ports;
  {
    std::lock_guard lock(mutex_);
    for (auto& [port, route] : routes_) ports.push_back(port);
  }
  for (std::uint16_t port : ports) remove_route(port);
}

std::uint16_t ChaosProxy::add_route(std::uint16_t target_port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("proxy socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("proxy listener: " + why);
  }
  auto route = std::make_shared<Route>();
  route->port = ntohs(addr.sin_port);
  route->target = target_port;
  route->listen_fd = fd;
  route->counters = counters_;
  route->rng.seed(seed_ ^ (std::uint64_t{route->port} << 32) ^ target_port);
  route->threads = 1;
  {
    std::lock_guard lock(mutex_);
    routes_[route->port] = route;
  }
  std::thread([this, route] { accept_loop(route); }).detach();
  return route->port;
}

void ChaosProxy::remove_route(std::uint16_t port) {
  std::shared_ptr<Route> route;
  {
    std::lock_guard lock(mutex_);
    auto it = routes_.find(port);
    if (it == routes_.end()) return;
    route = it->second;
    routes_.erase(it);
  }
  route->closed = true;
  for (auto& relay : route->live_relays()) relay->reset = true;
  std::unique_lock lock(route->mutex);
  // Every thread notices within one poll period.
  route->threads_done.wait_for(lock, std::chrono::seconds(5), [&] { return route->threads == 0; });
}

std::shared_ptr<ChaosProxy::Route> ChaosProxy::find(std::uint16_t port) const {
  std::lock_guard lock(mutex_);
  auto it = routes_.find(port);
  return it == routes_.end() ? nullptr : it->second;
}

void ChaosProxy::shape(std::uint16_t port, RouteShaping shaping, ProxyClock::time_point until) {
  if (auto route = find(port)) {
    std::lock_guard lock(route->mutex);
    route->shaping = shaping;
    route->shaping_until = until;
  }
}

std::size_t ChaosProxy::reset(std::uint16_t port, std::size_t most) {
  auto route = find(port);
  if (!route) return 0;
  auto relays = route->live_relays();
  if (relays.size() > most) relays.resize(most);
  for (auto& relay : relays) relay->reset = true;
  counters_->resets += relays.size();
  return relays.size();
}

std::size_t ChaosProxy::blackhole(std::uint16_t port) {
  auto route = find(port);
  if (!route) return 0;
  auto relays = route->live_relays();
  for (auto& relay : relays) relay->blackholed = true;
  return relays.size();
}

void ChaosProxy::corrupt_next(std::uint16_t port) {
  if (auto route = find(port)) {
    std::lock_guard lock(route->mutex);
    ++route->corrupt_pending;
  }
}

void ChaosProxy::heal_all() {
  std::lock_guard lock(mutex_);
  for (auto& [port, route] : routes_) {
    std::lock_guard route_lock(route->mutex);
    route->shaping_until = {};
    route->corrupt_pending = 0;
  }
}

ProxyStats ChaosProxy::stats() const {
  return {counters_->connections.load(), counters_->bytes.load(), counters_->resets.load(),
          counters_->corrupted.load()};
}

void ChaosProxy::accept_loop(std::shared_ptr<Route> route) {
  while (!route->closed) {
    pollfd p{route->listen_fd, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    int client = ::accept4(route->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    int target = dial_loopback(route->target);
    if (target < 0) {  // the peer is gone: refuse as it would
      close_with_reset(client);
      continue;
    }
    for (int fd : {client, target}) {
      set_nodelay(fd);
      set_nonblocking(fd);
    }
    auto relay = std::make_shared<Relay>();
    relay->client = client;
    relay->target = target;
    {
      std::lock_guard lock(route->mutex);
      route->relays.push_back(relay);
      route->threads += 2;
    }
    ++route->counters->connections;
    std::thread([route, relay] { relay_direction(route, relay, relay->client, relay->target); }).detach();
    std::thread([route, relay] { relay_direction(route, relay, relay->target, relay->client); }).detach();
  }
  ::close(route->listen_fd);
  route->thread_ended();
}

void ChaosProxy::relay_direction(std::shared_ptr<Route> route, std::shared_ptr<Relay> relay, int from, int to) {
  struct Piece {
    ProxyClock::time_point due;
    std::vector<std::uint8_t> bytes;
    std::size_t sent = 0;
  };
  std::deque<Piece> queue;
  std::size_t queued = 0;
  ProxyClock::time_point line_free{};  // when the paced "wire" is free again
  bool eof = false, broken = false;
  std::vector<std::uint8_t> buffer(kReadBytes);

  while (!relay->reset && !route->closed) {
    const auto now = ProxyClock::now();
    if (relay->blackholed) {
      queue.clear();
      queued = 0;
    }
    if (eof && queue.empty()) break;
    const bool due = !queue.empty() && queue.front().due <= now;
    int timeout = kPollMs;
    if (!queue.empty() && !due)
      timeout = std::min<int>(timeout, static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(
                                                            queue.front().due - now).count()));
    pollfd fds[2] = {{from, static_cast<short>(!eof && queued < kMaxQueued ? POLLIN : 0), 0},
                     {to, static_cast<short>(due ? POLLOUT : 0), 0}};
    if (::poll(fds, 2, timeout) < 0 && errno != EINTR) {
      broken = true;
      break;
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = ::read(from, buffer.data(), buffer.size());
      if (n > 0) {
        if (!relay->blackholed) {
          const auto arrived = ProxyClock::now();
          const RouteShaping shaping = route->current_shaping(arrived);
          Piece piece{std::max(arrived + shaping.latency, line_free),
                      std::vector<std::uint8_t>(buffer.begin(), buffer.begin() + n)};
          if (long at = route->take_corruption(static_cast<std::size_t>(n)); at >= 0) {
            piece.bytes[static_cast<std::size_t>(at)] ^= 0x5a;
            ++route->counters->corrupted;
          }
          if (shaping.bytes_per_second > 0)
            line_free = piece.due + std::chrono::nanoseconds(static_cast<std::int64_t>(
                                        static_cast<double>(n) * 1e9 / static_cast<double>(shaping.bytes_per_second)));
          queued += piece.bytes.size();
          queue.push_back(std::move(piece));
        }
      } else if (n == 0) {
        eof = true;
      } else if (errno != EAGAIN && errno != EINTR) {
        broken = true;
        break;
      }
    }
    if (fds[1].revents & (POLLERR | POLLHUP)) {
      broken = true;
      break;
    }
    if (due && (fds[1].revents & POLLOUT)) {
      Piece& front = queue.front();
      ssize_t n = ::send(to, front.bytes.data() + front.sent, front.bytes.size() - front.sent, MSG_NOSIGNAL);
      if (n > 0) {
        front.sent += static_cast<std::size_t>(n);
        route->counters->bytes += static_cast<std::uint64_t>(n);
        if (front.sent == front.bytes.size()) {
          queued -= front.bytes.size();
          queue.pop_front();
        }
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        broken = true;
        break;
      }
    }
  }
  // A clean end passes the EOF on (unless black-holed: silence stays silence);
  // anything else ends the whole connection.
  if (broken || relay->reset || route->closed) {
    relay->reset = true;
  } else if (!relay->blackholed) {
    ::shutdown(to, SHUT_WR);
  }
  if (relay->directions_left.fetch_sub(1) == 1) {
    if (relay->reset) {
      close_with_reset(relay->client);
      close_with_reset(relay->target);
    } else {
      ::close(relay->client);
      ::close(relay->target);
    }
  }
  route->thread_ended();
}

}  // namespace ferry::chaos
