// When a long wait speaks (core/wait_notice.h): not before 5 s, then every 30 s, never twice for one period.
#include <catch2/catch.hpp>

#include "core/wait_notice.h"

using namespace ferry;
using namespace std::chrono_literals;

TEST_CASE("wait notice: the first line after 5 s, then one every 30 s, each saying how long it has waited",
          "[wait_notice]") {
  const auto t0 = WaitNotice::Clock::now();
  WaitNotice notice(t0);
  CHECK(notice.next() == t0 + 5s);
  CHECK_FALSE(notice.due(t0));
  CHECK_FALSE(notice.due(t0 + 4999ms));
  auto first = notice.due(t0 + 5s);
  REQUIRE(first);
  CHECK(*first == 5000ms);
  CHECK_FALSE(notice.due(t0 + 6s));  // said: quiet until the next period
  CHECK(notice.next() == t0 + 35s);
  CHECK_FALSE(notice.due(t0 + 34s));
  REQUIRE(notice.due(t0 + 35s));
  // A waiter that woke late says it once, not once per period missed.
  auto late = notice.due(t0 + 200s);
  REQUIRE(late);
  CHECK(*late == 200'000ms);
  CHECK_FALSE(notice.due(t0 + 200s));
  CHECK(notice.next() > t0 + 200s);
  CHECK(seconds_text(12'999ms) == "12 s");
}
