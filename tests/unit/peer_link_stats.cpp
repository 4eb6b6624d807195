// A link's measurement folded from its lanes and its collectives' transfers (peer/link_stats.h).
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include "peer/link_stats.h"

using namespace ferry::peer;

namespace {

LaneSample tcp_lane(uint32_t rtt_us, uint64_t rate, uint64_t retrans, uint64_t segs) {
  return {false, TcpSample{rtt_us, rate, retrans, segs}};
}

}  // namespace

TEST_CASE("link stats: TCP lanes add their delivery rates, average their RTTs and pool their retransmissions",
          "[peer][links]") {
  LinkTransfers::Summary transfers{1000, 500, true};
  // The third lane has not measured an RTT yet (0): it must not drag the mean down.
  auto e = link_entry(7, 9, transfers,
                      {tcp_lane(40'000, 1'000'000, 10, 1000), tcp_lane(60'000, 3'000'000, 0, 3000),
                       tcp_lane(0, 0, 0, 0), LaneSample{}});
  CHECK(e.from_peer == 7);
  CHECK(e.to_peer == 9);
  CHECK(e.shared_memory == 0);
  CHECK(e.delivery_rate_bps == 4'000'000);
  CHECK(e.rtt_us == 50'000);
  CHECK(e.retrans_ppm == 2500);  // 10 of 4000 segments
  CHECK(e.goodput_bps == 500);
  CHECK(e.bytes == 1000);
  CHECK(e.age_ms == 0);
}

TEST_CASE("link stats: a link whose every lane is shared memory says so and has no TCP figures", "[peer][links]") {
  auto shm = link_entry(1, 2, {}, {LaneSample{true, std::nullopt}, LaneSample{true, std::nullopt}});
  CHECK(shm.shared_memory == 1);
  CHECK(shm.rtt_us == 0);
  CHECK(shm.delivery_rate_bps == 0);
  auto mixed = link_entry(1, 2, {}, {LaneSample{true, std::nullopt}, tcp_lane(100, 5, 0, 1)});
  CHECK(mixed.shared_memory == 0);
  CHECK(mixed.rtt_us == 100);
  CHECK(link_entry(1, 2, {}, {}).shared_memory == 0);  // no lanes: nothing to claim
}

TEST_CASE("link stats: goodput is over the transfers since the last summary, small ones count only in bytes",
          "[peer][links]") {
  LinkTransfers t;
  CHECK_FALSE(t.summarize().fresh);
  t.note(4 << 20, 2.0);
  t.note(4 << 20, 2.0);
  t.note(1000, 5.0);  // a round trip's worth: would halve the rate if it counted
  auto first = t.summarize();
  CHECK(first.fresh);
  CHECK(first.bytes == (8u << 20) + 1000);
  CHECK(first.goodput_bps == (2u << 20));
  auto idle = t.summarize();  // nothing since: the last rate stands
  CHECK_FALSE(idle.fresh);
  CHECK(idle.goodput_bps == (2u << 20));
  t.note(8 << 20, 1.0);
  CHECK(t.summarize().goodput_bps == (8u << 20));  // a new window, not a mean over all time
}

TEST_CASE("link stats: TCP_INFO of a TCP socket reads, anything else is refused", "[peer][links]") {
  int tcp = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(tcp >= 0);
  CHECK(read_tcp_info(tcp).has_value());
  ::close(tcp);
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  CHECK_FALSE(read_tcp_info(fds[0]).has_value());
  ::close(fds[0]);
  ::close(fds[1]);
  CHECK_FALSE(read_tcp_info(-1).has_value());
}
