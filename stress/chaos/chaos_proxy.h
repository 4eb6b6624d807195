// The chaos proxy: a TCP relay on 127.0.0.1 in front of each peer's p2p
// listener (the peer advertises the proxy's port, so every ring link to it
// runs through here), with faults that can be switched on per route:
//   latency    every byte is held back this long (a delay line: throughput stays)
//   bandwidth  each connection is paced to this many bytes per second
//   reset      every connection of the route is closed with a TCP RST
//   blackhole  the route's current connections stay open but carry nothing more
//   corrupt    one byte of the next bytes relayed on the route is flipped
//
// Each relayed connection is one thread per direction: poll the source,
// read, stamp each piece with the time it may leave (now + latency, and no
// sooner than the previous piece's departure + its bytes / bandwidth), write
// when due. A direction holds at most kMaxQueued bytes before it stops reading.
//
// Threads: every public member may be called from any thread (one mutex
// guards the routes); the relay threads read the route's fault settings under
// that route's own mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace ferry::chaos {

using ProxyClock = std::chrono::steady_clock;

struct Counters;  // the proxy's statistics, shared with its relay threads

struct RouteShaping {
  std::chrono::milliseconds latency{0};
  std::uint64_t bytes_per_second = 0;  // 0: unlimited
};

struct ProxyStats {
  std::uint64_t connections = 0;
  std::uint64_t bytes = 0;
  std::uint64_t resets = 0;
  std::uint64_t corrupted = 0;
};

class ChaosProxy {
 public:
  explicit ChaosProxy(std::uint64_t seed);
  ~ChaosProxy();
  ChaosProxy(const ChaosProxy&) = delete;
  ChaosProxy& operator=(const ChaosProxy&) = delete;

  // Listens on 127.0.0.1 (a free port) and relays every connection to
  // 127.0.0.1:target_port. Returns the listening port, which names the route.
  std::uint16_t add_route(std::uint16_t target_port);
  // Closes the listener and every connection of the route.
  void remove_route(std::uint16_t route);

  // Shaping for the route's connections, old and new, until `until`.
  void shape(std::uint16_t route, RouteShaping shaping, ProxyClock::time_point until);
  // RSTs the route's open connections, at most `most` of them; returns how many.
  std::size_t reset(std::uint16_t route, std::size_t most = SIZE_MAX);
  // The route's open connections relay nothing more (bytes are read and dropped); returns how many.
  std::size_t blackhole(std::uint16_t route);
  // Flips one byte of the next piece relayed on the route (either direction).
  void corrupt_next(std::uint16_t route);
  // Ends every shaping on every route (blackholed connections stay dead).
  void heal_all();

  ProxyStats stats() const;

 private:
  struct Route;
  struct Relay;

  void accept_loop(std::shared_ptr<Route> route);
  static void relay_direction(std::shared_ptr<Route> route, std::shared_ptr<Relay> relay, int from, int to);
  std::shared_ptr<Route> find(std::uint16_t route) const;

  mutable std::mutex mutex_;
  std::map<std::uint16_t, std::shared_ptr<Route>> routes_;  // guarded by mutex_
  std::uint64_t seed_;
  std::shared_ptr<Counters> counters_;  // shared with the relay threads, which may outlive a route
};

}  // namespace ferry::chaos
