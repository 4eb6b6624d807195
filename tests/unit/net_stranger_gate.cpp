#include <catch2/catch.hpp>

#include <asio/ip/address.hpp>

#include "core/log_throttle.h"
#include "net/stranger_gate.h"

using ferry::LogThrottle;
using ferry::net::StrangerGate;
using ferry::net::StrangerLimits;

namespace {
asio::ip::address ip(const char* text) { return asio::ip::make_address(text); }
}  // namespace

TEST_CASE("stranger gate: caps per source and in total, and a released pass frees its place", "[net][strangers]") {
  auto gate = StrangerGate::create("test", {2, 3});
  auto a1 = gate->admit(ip("10.0.0.1"));
  auto a2 = gate->admit(ip("10.0.0.1"));
  REQUIRE(a1);
  REQUIRE(a2);
  CHECK_FALSE(gate->admit(ip("10.0.0.1")));  // its source is full
  auto b1 = gate->admit(ip("10.0.0.2"));
  REQUIRE(b1);
  CHECK_FALSE(gate->admit(ip("10.0.0.3")));  // the total is full
  CHECK(gate->strangers() == 3);
  CHECK(gate->refused() == 2);

  a1->release();
  a1->release();  // idempotent: frees one place, not two
  CHECK(gate->strangers() == 2);
  auto a3 = gate->admit(ip("10.0.0.1"));
  CHECK(a3);
  CHECK_FALSE(gate->admit(ip("10.0.0.1")));
  b1.reset();  // destruction releases too
  CHECK(gate->admit(ip("10.0.0.3")));
}

TEST_CASE("stranger gate: an IPv6 host counts by its /64, a v4-mapped address as IPv4", "[net][strangers]") {
  auto gate = StrangerGate::create("test", {1, 10});
  auto first = gate->admit(ip("2001:db8:1:2::1"));
  REQUIRE(first);
  CHECK_FALSE(gate->admit(ip("2001:db8:1:2:ffff::9")));  // same /64
  CHECK(gate->admit(ip("2001:db8:1:3::1")));             // another /64
  auto v4 = gate->admit(ip("192.0.2.7"));
  REQUIRE(v4);
  CHECK_FALSE(gate->admit(ip("::ffff:192.0.2.7")));
}

TEST_CASE("stranger gate: the default caps leave most descriptors to the run", "[net][strangers]") {
  StrangerLimits small = StrangerLimits::within(1024);
  CHECK(small.total == 256);
  CHECK(small.per_source == 128);
  StrangerLimits large = StrangerLimits::within(1 << 20);
  CHECK(large.total == StrangerLimits{}.total);
  CHECK(large.per_source == StrangerLimits{}.per_source);
  StrangerLimits tiny = StrangerLimits::within(10);
  CHECK(tiny.total >= 1);
  CHECK(tiny.per_source >= 1);
}

TEST_CASE("log throttle: one line per interval, which counts the events held back", "[core][log]") {
  LogThrottle throttle(std::chrono::milliseconds(1000));
  auto t0 = LogThrottle::Clock::now();
  CHECK(throttle.admit(t0) == 1);
  CHECK(throttle.admit(t0 + std::chrono::milliseconds(10)) == 0);
  CHECK(throttle.admit(t0 + std::chrono::milliseconds(500)) == 0);
  CHECK(throttle.admit(t0 + std::chrono::milliseconds(1001)) == 3);
  CHECK(throttle.admit(t0 + std::chrono::milliseconds(1002)) == 0);
}
