// Caps on strangers: connections that have not yet proved themselves (shown
// the run secret, or had their hello accepted where no secret is set). Until
// then a connection costs a descriptor and a deadline timer and gives
// nothing, so a listener on the internet holds only so many of them, in total
// and per source; beyond either cap a new one is closed at once, before any
// read. An IPv6 source counts by its /64, which is what one host is usually
// given; an attacker with many addresses meets the total cap instead.
//
// Threading: thread-safe; a Pass may be released on any thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <asio/ip/address.hpp>

#include "core/log_throttle.h"

namespace ferry::net {

struct StrangerLimits {
  // Loopback test runs bring every peer from one address, and a peer's two
  // neighbours open up to 64 lanes each at once: per source is sized for a
  // whole host's honest burst, not for one connection.
  uint32_t per_source = 256;
  uint32_t total = 1024;

  // Strangers may hold at most a quarter of the process's descriptors, so
  // the links, eventfds and rings of the run always find theirs.
  static StrangerLimits within(uint64_t fd_limit) {
    StrangerLimits limits;
    limits.total = static_cast<uint32_t>(std::clamp<uint64_t>(fd_limit / 4, 16, limits.total));
    limits.per_source = std::min(limits.per_source, std::max<uint32_t>(limits.total / 2, 1));
    return limits;
  }
};

class StrangerGate : public std::enable_shared_from_this<StrangerGate> {
 public:
  // Holds one stranger's place until release() or destruction; copies share it.
  class Pass {
   public:
    ~Pass() { release(); }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    // The connection proved itself (or is gone): it no longer counts. Idempotent.
    void release();

   private:
    friend class StrangerGate;
    Pass(std::shared_ptr<StrangerGate> gate, std::string source) : gate_(std::move(gate)), source_(std::move(source)) {}
    std::mutex mu_;
    std::shared_ptr<StrangerGate> gate_;  // null once released
    std::string source_;
  };

  // `what` names the listener in log lines ("master", "p2p"); `held` says in
  // them which connections the caps count ("open" for a server whose clients
  // never prove themselves, such as HTTP).
  static std::shared_ptr<StrangerGate> create(std::string what, StrangerLimits limits = {},
                                              std::string held = "unproven (not yet authenticated)");

  // A pass for a new connection from `source`, or null when a cap is reached
  // (the refusal is logged, at most once a second).
  std::shared_ptr<Pass> admit(const asio::ip::address& source);

  uint32_t strangers() const;
  uint64_t refused() const;
  const StrangerLimits& limits() const { return limits_; }

 private:
  StrangerGate(std::string what, StrangerLimits limits, std::string held)
      : what_(std::move(what)), held_(std::move(held)), limits_(limits) {}
  void leave(const std::string& source);

  const std::string what_;
  const std::string held_;
  const StrangerLimits limits_;
  mutable std::mutex mu_;
  std::map<std::string, uint32_t> by_source_;
  uint32_t total_ = 0;
  uint64_t refused_ = 0;
  LogThrottle refusal_log_;
};

}  // namespace ferry::net
