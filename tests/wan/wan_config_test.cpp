#include <catch2/catch.hpp>
#include <stdexcept>

#include "wan_config.h"

using ferry::wan::WanConfig;

TEST_CASE("spec parses every key and unit", "[wan][config]") {
  const WanConfig c = WanConfig::parse("rtt=50ms,loss=0.1%,rate=200mbit,cc=bbr,seed=7,hosts=3");
  CHECK(c.rtt_ms == 50.0);
  CHECK(c.loss == Approx(0.001));
  CHECK(c.rate_bps == 200'000'000u);
  CHECK(c.cc == "bbr");
  CHECK(c.seed == 7u);
  CHECK(c.hosts == 3);

  CHECK(WanConfig::parse("rtt=0.2s").rtt_ms == Approx(200.0));
  CHECK(WanConfig::parse("rtt=500us").rtt_ms == Approx(0.5));
  CHECK(WanConfig::parse("rtt=30").rtt_ms == 30.0);
  CHECK(WanConfig::parse("loss=0.02").loss == Approx(0.02));
  CHECK(WanConfig::parse("loss=100%").loss == 1.0);
  CHECK(WanConfig::parse("rate=1gbit").rate_bps == 1'000'000'000u);
  CHECK(WanConfig::parse("rate=512kbit").rate_bps == 512'000u);
  CHECK(WanConfig::parse("rate=none").rate_bps == 0u);
  CHECK(WanConfig::parse("RTT = 10ms , CC=Reno").cc == "reno");
  CHECK(WanConfig::parse("burst=32k,limit=2m").tbf_burst_bytes() == 32u * 1024);
  CHECK(WanConfig::parse("burst=32k,limit=2m").tbf_limit_bytes() == 2u * 1024 * 1024);
}

TEST_CASE("spec defaults are the ANCHORS network", "[wan][config]") {
  const WanConfig c = WanConfig::parse("");
  CHECK(c == WanConfig{});
  CHECK(c.rtt_ms == 50.0);
  CHECK(c.loss == 0.0);
  CHECK(c.rate_bps == 200'000'000u);
  CHECK(c.cc == "cubic");
  // One BDP of queue, 1 ms of bucket.
  CHECK(c.tbf_limit_bytes() == 1'250'000u);
  CHECK(c.tbf_burst_bytes() == 64u * 1024);
  CHECK(WanConfig::parse("gso=off").tbf_burst_bytes() == 25'000u);
}

TEST_CASE("spec round-trips through to_string", "[wan][config]") {
  const WanConfig c = WanConfig::parse("hosts=4,rtt=12.5ms,loss=0.3%,rate=50mbit,cc=reno,seed=99,burst=20000,gso=off");
  CHECK(WanConfig::parse(c.to_string()) == c);
}

TEST_CASE("spec refuses what it cannot mean", "[wan][config]") {
  CHECK_THROWS_AS(WanConfig::parse("rtt=fast"), std::invalid_argument);
  CHECK_THROWS_AS(WanConfig::parse("rtt=-5ms"), std::invalid_argument);
  CHECK_THROWS_AS(WanConfig::parse("loss=150%"), std::invalid_argument);
  CHECK_THROWS_AS(WanConfig::parse("rate=200mbps"), std::invalid_argument);  // tc: megabytes
  CHECK_THROWS_AS(WanConfig::parse("hosts=0"), std::invalid_argument);
  CHECK_THROWS_AS(WanConfig::parse("hosts=255"), std::invalid_argument);
  CHECK_THROWS_AS(WanConfig::parse("jitter=5ms"), std::invalid_argument);
  CHECK_THROWS_AS(WanConfig::parse("rtt"), std::invalid_argument);
  CHECK_THROWS_AS(WanConfig::parse("cc=cu bic"), std::invalid_argument);
  CHECK_THROWS_WITH(WanConfig::parse("rate=fast"), Catch::Contains("rate") && Catch::Contains("mbit"));
}
