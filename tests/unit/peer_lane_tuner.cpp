// The rule that sizes a ring link's connection count (peer/lane_tuner.h),
// driven by a model link: each lane carries `per_lane` bytes/s up to the
// link's `capacity`, the way loss-limited TCP connections share a path, and
// a full path queues (its RTT rises by half) unless `queue_shows` is off;
// beyond `knee` lanes the path loses `beyond_knee` of its rate (contention).
// Each collective sends 64 MiB over the link.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "peer/lane_tuner.h"

using namespace ferry::peer;

namespace {

struct ModelLink {
  double per_lane;  // bytes/s one connection carries
  double capacity;  // bytes/s the path carries
  uint32_t rtt_us;
  bool lossy;       // retransmits as it goes
  bool queue_shows = true;
  uint32_t knee = 64;
  double beyond_knee = 1;
  double bbr_rate = 0;  // bytes/s the link carries once its lanes run bbr
  uint32_t lanes_up = 0;
  LaneTuner::Transfer last{};

  ModelLink(double per_lane_, double capacity_, uint32_t rtt_us_, bool lossy_)
      : per_lane(per_lane_), capacity(capacity_), rtt_us(rtt_us_), lossy(lossy_) {}

  // Runs `collectives` all-reduces, further lanes dialled at once up to
  // `max_up`; returns the count each collective ran with.
  std::vector<uint32_t> run(LaneTuner& tuner, int collectives, uint32_t max_up = 64) {
    std::vector<uint32_t> used;
    lanes_up = std::max(lanes_up, tuner.wanted());
    for (int i = 0; i < collectives; ++i) {
      uint32_t in_use = std::min(tuner.wanted(), lanes_up);
      used.push_back(in_use);
      double rate = std::min(capacity, per_lane * in_use) * (in_use > knee ? beyond_knee : 1);
      if (tuner.bbr()) rate = bbr_rate;
      bool full = per_lane * in_use >= capacity;
      LaneTuner::Transfer t{};
      t.bytes = 64u << 20;
      t.seconds = static_cast<double>(t.bytes) / rate;
      t.now_s = last.now_s + t.seconds;
      t.retransmits = last.retransmits + (lossy ? 100 : 0);
      t.rtt_us = full && queue_shows ? rtt_us * 3 / 2 : rtt_us;
      t.min_rtt_us = queue_shows ? rtt_us : 0;
      t.lanes_up = lanes_up;
      last = t;
      lanes_up = std::max(lanes_up, std::min(tuner.observe(t), max_up));
    }
    return used;
  }
};

uint32_t most(const std::vector<uint32_t>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST_CASE("lane tuner: a long lossy link doubles its lanes while the rate rises, then holds", "[lanes]") {
  // 1 MB/s per connection, 25 MB/s path (200 Mbit/s), 50 ms: 4 lanes carry 16 %.
  ModelLink link(1e6, 25e6, 50'000, true);
  LaneTuner tuner(4, 64);
  auto used = link.run(tuner, 12);
  // One collective per step: 4 -> 8 -> 16 -> 32, where the path is full (its RTT rose): it holds.
  CHECK(std::vector<uint32_t>(used.begin(), used.begin() + 5) == std::vector<uint32_t>{4, 8, 16, 32, 32});
  CHECK(most(used) == 32);
  CHECK(tuner.wanted() == 32);
  CHECK(tuner.last_rate() == Approx(25e6).epsilon(0.02));
}

TEST_CASE("lane tuner: a doubling that costs goodput is undone, one that gains nothing is kept (no further)",
          "[lanes]") {
  SECTION("costs: past 32 lanes the path loses a fifth (contention)") {
    ModelLink link(1e6, 25e6, 50'000, true);
    link.queue_shows = false;
    link.knee = 32;
    link.beyond_knee = 0.8;
    LaneTuner tuner(4, 64);
    auto used = link.run(tuner, 12);
    CHECK(most(used) == 64);
    CHECK(tuner.wanted() == 32);
    CHECK(used.back() == 32);
  }
  SECTION("nothing: the path is full at 25 either way (in a ring another link may be the limit)") {
    ModelLink link(1e6, 25e6, 50'000, true);
    link.queue_shows = false;
    LaneTuner tuner(4, 64);
    auto used = link.run(tuner, 12);
    CHECK(std::vector<uint32_t>(used.begin(), used.begin() + 6) == std::vector<uint32_t>{4, 8, 16, 32, 64, 64});
    CHECK(tuner.wanted() == 64);
  }
}

TEST_CASE("lane tuner: a short clean link (loopback) never grows", "[lanes]") {
  ModelLink link(2e9, 2e9, 40, false);
  LaneTuner tuner(4, 64);
  CHECK(most(link.run(tuner, 100)) == 4);
}

TEST_CASE("lane tuner: a long clean link that the first lanes already fill stays as it is", "[lanes]") {
  SECTION("its RTT shows the full path: no doubling at all") {
    ModelLink link(10e6, 25e6, 50'000, false);  // 4 x 10 MB/s > 25 MB/s
    LaneTuner tuner(4, 64);
    CHECK(most(link.run(tuner, 30)) == 4);
  }
  SECTION("no RTT signal: one doubling, which gains nothing, kept, and no further until a reprobe") {
    ModelLink link(10e6, 25e6, 50'000, false);
    link.queue_shows = false;
    LaneTuner tuner(4, 64);
    auto used = link.run(tuner, 8);  // 8 collectives of 2.7 s: within the first reprobe's 40 s
    CHECK(used == std::vector<uint32_t>{4, 8, 8, 8, 8, 8, 8, 8});
  }
}

TEST_CASE("lane tuner: collectives too short to measure a rate change nothing", "[lanes]") {
  LaneTuner tuner(4, 64);
  for (int i = 0; i < 1000; ++i) {
    // 256 KiB in 20 ms over a 50 ms path: 19 of them make less than 20 round trips... then a window.
    LaneTuner::Transfer t{256u << 10, 0.02, i * 0.02, static_cast<uint64_t>(i), 50'000, 50'000, 4};
    tuner.observe(t);
    if (i < 49) REQUIRE(tuner.windows() == 0);
  }
  CHECK(tuner.windows() > 0);  // they add up: 50 of them are one window
}

TEST_CASE("lane tuner: never beyond its cap, never below its start, and a failed dial caps it", "[lanes]") {
  SECTION("cap") {
    ModelLink link(1e6, 1e9, 50'000, true);
    LaneTuner tuner(4, 16);
    auto used = link.run(tuner, 20);
    CHECK(most(used) == 16);
    CHECK(*std::min_element(used.begin(), used.end()) == 4);
  }
  SECTION("the dials beyond 8 never come up") {
    ModelLink link(1e6, 1e9, 50'000, true);
    LaneTuner tuner(4, 64);
    link.run(tuner, 3, 8);
    tuner.limit(8);
    auto used = link.run(tuner, 10, 8);
    CHECK(tuner.wanted() == 8);
    CHECK(used.back() == 8);
  }
}

TEST_CASE("lane tuner: a held link measures afresh and probes again", "[lanes]") {
  ModelLink link(1e6, 25e6, 50'000, true);
  LaneTuner tuner(4, 64);
  link.run(tuner, 12);
  REQUIRE(tuner.wanted() == 32);  // the path is full (its RTT rose)
  link.capacity = 50e6;  // competing traffic left: the path carries twice as much, and no longer queues
  auto used = link.run(tuner, 30);
  CHECK(tuner.wanted() == 64);
  CHECK(used.back() == 64);
}

TEST_CASE("lane tuner: a lossy long link tries bbr before its first doubling, and keeps it only if it pays",
          "[lanes]") {
  SECTION("it pays: 85 % of the path at once, and a doubling adds nothing") {
    ModelLink link(1e6, 25e6, 100'000, true);
    link.bbr_rate = 21e6;
    LaneTuner tuner(4, 64, true);
    std::vector<bool> bbr;
    for (int i = 0; i < 4; ++i) {
      link.run(tuner, 1);
      bbr.push_back(tuner.bbr());
    }
    CHECK(bbr == std::vector<bool>{true, true, true, true});
    CHECK(tuner.wanted() == 8);  // doubled once after the switch; that changed nothing: kept, no further
  }
  SECTION("it costs: back to the lanes' own, then the doublings as without it") {
    ModelLink link(1e6, 25e6, 100'000, true);
    link.bbr_rate = 2e6;
    LaneTuner tuner(4, 64, true);
    auto used = link.run(tuner, 2);
    CHECK(!tuner.bbr());
    link.run(tuner, 40);
    CHECK(tuner.wanted() == 32);
  }
  SECTION("not allowed (or pinned by the user): never") {
    ModelLink link(1e6, 25e6, 100'000, true);
    LaneTuner tuner(4, 64, false);
    for (int i = 0; i < 20; ++i) {
      link.run(tuner, 1);
      REQUIRE(!tuner.bbr());
    }
  }
}

TEST_CASE("lane tuner: links rebuilt to the same peer resume where the last ones settled, held", "[lanes]") {
  ModelLink link(1e6, 25e6, 50'000, true);
  link.bbr_rate = 21e6;
  LaneTuner tuner(4, 64, true);
  tuner.resume(16, true, 0);
  CHECK(tuner.wanted() == 16);
  CHECK(tuner.bbr());
  auto used = link.run(tuner, 5);  // 5 collectives of 3.2 s: within the 20 s before a reprobe
  CHECK(used == std::vector<uint32_t>{16, 16, 16, 16, 16});
  CHECK(tuner.bbr());
  SECTION("never beyond its cap, nor bbr where it is not allowed") {
    LaneTuner pinned_cc(4, 32, false);
    pinned_cc.resume(64, true, 0);
    CHECK(pinned_cc.wanted() == 32);
    CHECK(!pinned_cc.bbr());
  }
}

TEST_CASE("lane tuner: a long path starts on bbr where allowed, and still climbs from there", "[lanes]") {
  SECTION("long, bbr allowed: on bbr before the first collective; doubles at the first window that is worth it") {
    ModelLink link(1e6, 25e6, 230'000, true);
    link.bbr_rate = 20e6;
    LaneTuner tuner(4, 64, true);
    tuner.path_rtt(230'000);
    CHECK(tuner.bbr());
    CHECK(tuner.wanted() == 4);
    link.run(tuner, 2);          // a window: 20 round trips
    CHECK(tuner.bbr());
    CHECK(tuner.wanted() == 8);  // not full: the path's RTT has not risen
  }
  SECTION("short (a LAN), or bbr not allowed, or no RTT known: the lanes' own congestion control") {
    LaneTuner lan(4, 64, true);
    lan.path_rtt(LaneTuner::kProbeRtt - 1);
    CHECK(!lan.bbr());
    LaneTuner pinned_cc(4, 64, false);
    pinned_cc.path_rtt(230'000);
    CHECK(!pinned_cc.bbr());
    LaneTuner unknown(4, 64, true);
    unknown.path_rtt(0);
    CHECK(!unknown.bbr());
  }
}
