// Sockets on emulated hosts for the root-only WAN tests: listen, connect with a deadline,
// full transfers with a deadline, and the skip marker for runs without root.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "wan_network.h"

namespace ferry::wan::test {

using Clock = std::chrono::steady_clock;

// A test that cannot run here says so with this marker, and returns: ctest
// reports it as skipped (SKIP_REGULAR_EXPRESSION in CMakeLists.txt), not passed.
inline void report_skipped(const char* why) { WARN("FERRY_TEST_SKIPPED: " << why); }

inline bool skip_unless_root() {
  if (::geteuid() == 0) return false;
  report_skipped("not root: emulated-WAN network tests need network namespaces");
  return true;
}

// Owns a socket fd.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Listens on `ip` (default: host.ip), which may be either family.
Fd listen_on(const Host& host, uint16_t port, const std::string& ip = "");
// Connects from `from` to `to`:port at `ip` (default: to.ip); an invalid Fd when not connected
// within timeout_ms, or at once when `from` has no route to that address's family.
Fd connect_from(const Host& from, const Host& to, uint16_t port, int timeout_ms, const std::string& ip = "");
Fd accept_one(const Fd& listener, int timeout_ms);
// Full transfers on a possibly non-blocking socket; false on error or past the deadline.
bool send_all(int fd, const uint8_t* data, size_t n, Clock::time_point deadline);
bool recv_all(int fd, uint8_t* data, size_t n, Clock::time_point deadline);
std::vector<uint8_t> pattern(size_t n, uint64_t seed);
// A connection from `from` to a listener of `to`:port: {the dialing end, the accepted end},
// both checked valid (3 s each).
std::pair<Fd, Fd> dial_and_accept(const Host& from, const Host& to, uint16_t port);
// One byte each way between a connection's two ends, checked.
void check_both_ways(const Fd& x, const Fd& y);
// Accepts one connection on `listener` (within 5 s) and echoes `rounds` single bytes on it;
// true when all came back. `listener` must outlive the future.
std::future<bool> echo_bytes(const Fd& listener, int rounds, Clock::time_point deadline);

}  // namespace ferry::wan::test
