// One group's link matrix (master/link_matrix.h): members only, bounded, aged.
#include <catch2/catch.hpp>

#include "master/link_matrix.h"

using namespace ferry::master;
using ferry::wire::LinkEntry;

namespace {

LinkEntry link(uint64_t from, uint64_t to, uint64_t goodput, uint32_t age_ms = 0) {
  LinkEntry e;
  e.from_peer = from;
  e.to_peer = to;
  e.goodput_bps = goodput;
  e.age_ms = age_ms;
  return e;
}

}  // namespace

TEST_CASE("link matrix: holds the last measurement of each ordered pair of members", "[master][links]") {
  LinkMatrix m;
  const std::vector<uint64_t> members{1, 2, 3};
  m.record(1, {link(1, 2, 100)}, members, 1000);
  m.record(2, {link(2, 3, 200)}, members, 1000);
  m.record(1, {link(1, 2, 150)}, members, 2000);  // replaces, not appends
  auto all = m.entries(2500, 100);
  REQUIRE(all.size() == 2);
  CHECK(all[0] == link(1, 2, 150, 500));
  CHECK(all[1] == link(2, 3, 200, 1500));
}

TEST_CASE("link matrix: ignores strangers, other peers' rows and self-links", "[master][links]") {
  LinkMatrix m;
  const std::vector<uint64_t> members{1, 2};
  m.record(1, {link(1, 9, 1), link(2, 1, 1), link(1, 1, 1)}, members, 0);
  m.record(9, {link(9, 1, 1)}, members, 0);
  CHECK(m.size() == 0);
}

TEST_CASE("link matrix: a member that leaves takes its row and column with it", "[master][links]") {
  LinkMatrix m;
  const std::vector<uint64_t> members{1, 2, 3};
  m.record(1, {link(1, 2, 1), link(1, 3, 1)}, members, 0);
  m.record(2, {link(2, 3, 1), link(2, 1, 1)}, members, 0);
  m.record(3, {link(3, 1, 1)}, members, 0);
  m.forget(1);
  auto left = m.entries(0, 100);
  REQUIRE(left.size() == 1);
  CHECK(left[0].from_peer == 2);
  CHECK(left[0].to_peer == 3);
}

TEST_CASE("link matrix: entries age from when they were measured and go once too old", "[master][links]") {
  LinkMatrix m;
  const std::vector<uint64_t> members{1, 2, 3};
  m.record(1, {link(1, 2, 1, 300)}, members, 1000);  // already 300 ms old when it arrived
  m.record(2, {link(2, 3, 1)}, members, 1500);
  m.expire(2000, 1500);
  CHECK(m.size() == 2);
  CHECK(m.entries(2000, 100)[0].age_ms == 1300);
  m.expire(2400, 1500);  // 1>2 is now 1700 ms old, 2>3 900
  auto left = m.entries(2400, 100);
  REQUIRE(left.size() == 1);
  CHECK(left[0].from_peer == 2);
  m.expire(3100, 1500);
  CHECK(m.size() == 0);
}

TEST_CASE("link matrix: an answer holds at most its limit", "[master][links]") {
  LinkMatrix m;
  std::vector<uint64_t> members;
  for (uint64_t id = 1; id <= 5; ++id) members.push_back(id);
  for (uint64_t from : members) {
    std::vector<LinkEntry> row;
    for (uint64_t to : members) row.push_back(link(from, to, 1));
    m.record(from, row, members, 0);
  }
  CHECK(m.size() == 20);  // N(N-1)
  CHECK(m.entries(0, 7).size() == 7);
}

TEST_CASE("link matrix: a pair's capacity is its probed rate less the share the probe resent, or its goodput",
          "[master][links]") {
  LinkMatrix m;
  const std::vector<uint64_t> members{1, 2, 3};
  LinkEntry overrun = link(1, 2, 12'000'000);
  overrun.retrans_ppm = 90'000;  // a faster sender into a slower downlink
  LinkEntry clean = link(1, 3, 12'000'000);
  clean.retrans_ppm = 1'000;
  m.record(1, {overrun, clean}, members, 0, true);
  CHECK(m.capacity(1, 2) == Approx(10'920'000));
  CHECK(m.capacity(1, 3) == Approx(11'988'000));
  // A ring link's later report keeps the probed figure (its goodput is the ring's pace)...
  LinkEntry paced = link(1, 3, 8'000'000);
  paced.retrans_ppm = 500'000;
  m.record(1, {paced}, members, 10);
  CHECK(m.capacity(1, 3) == Approx(11'988'000));
  // ... unless it carried more than the probe read.
  m.record(1, {link(1, 2, 11'500'000)}, members, 20);
  CHECK(m.capacity(1, 2) == Approx(11'500'000));
  CHECK(m.capacity(2, 1) == 0);  // unknown
  SECTION("a probe's report past a million per million counts as all resent, not as a negative rate") {
    LinkEntry garbled = link(2, 3, 5'000'000);
    garbled.retrans_ppm = 3'000'000;
    m.record(2, {garbled}, members, 30, true);
    CHECK(m.capacity(2, 3) == 0);
    m.record(2, {link(2, 3, 4'000'000)}, members, 40);
    CHECK(m.capacity(2, 3) == Approx(4'000'000));
  }
}

TEST_CASE("link matrix: a failed simultaneous open holds for the pair either way, backs off, and a link forgets it",
          "[master][links][punch]") {
  LinkMatrix m;
  const std::vector<uint64_t> members{1, 2, 3};
  const LinkMatrix::Backoff backoff{1000, 3000};
  CHECK_FALSE(m.punch_failed(1, 2));
  CHECK(m.mark_punch_failed(2, 1, 0, backoff) == 1000);
  CHECK(m.punch_failed(1, 2));
  CHECK(m.punch_failed(2, 1));
  CHECK_FALSE(m.punch_failed(1, 3));
  CHECK_FALSE(m.dial_failed(1, 2));  // a punch is not a dial
  m.expire(999, 60'000);
  CHECK(m.punch_failed(1, 2));
  m.expire(1000, 60'000);
  CHECK_FALSE(m.punch_failed(1, 2));
  CHECK(m.mark_punch_failed(1, 2, 1000, backoff) == 2000);  // doubled
  CHECK(m.mark_punch_failed(1, 2, 1000, backoff) == 3000);  // at most max
  m.record(1, {link(1, 2, 100)}, members, 1500);            // the pair linked after all
  CHECK_FALSE(m.punch_failed(1, 2));
  CHECK(m.mark_punch_failed(1, 2, 2000, backoff) == 1000);  // its count starts again
  m.forget(2);
  CHECK_FALSE(m.punch_failed(1, 2));
}
