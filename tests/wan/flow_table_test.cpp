// A stateful host's flow table: it admits exactly the flows recorded, for exactly the
// timeout after the last SYN, and stays within its capacity by forgetting the flow that
// expires first (pure code; the root tests in wan_inbound_test.cpp show it in the forwarder).
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <stdexcept>

#include "flow_table.h"

using ferry::wan::FlowTable;

TEST_CASE("a flow key tells every field of the 5-tuple apart", "[wan][flow_table]") {
  std::set<uint64_t> keys = {FlowTable::key(false, 1, 5000, 6000), FlowTable::key(true, 1, 5000, 6000),
                             FlowTable::key(false, 2, 5000, 6000), FlowTable::key(false, 1, 5001, 6000),
                             FlowTable::key(false, 1, 5000, 6001), FlowTable::key(false, 1, 6000, 5000)};
  CHECK(keys.size() == 6);
  CHECK(FlowTable::key(false, 253, 65535, 65535) != FlowTable::key(true, 253, 65535, 65535));
}

TEST_CASE("a flow table admits the flows a host opened, and only within the timeout", "[wan][flow_table]") {
  constexpr uint64_t kTimeout = 1000;
  FlowTable t(64, kTimeout);
  const uint64_t flow = FlowTable::key(false, 3, 40000, 7000);
  CHECK_FALSE(t.admits(flow, 10));  // nothing opened yet
  t.opened(flow, 100);
  CHECK(t.admits(flow, 100));
  CHECK(t.admits(flow, 100 + kTimeout - 1));
  CHECK_FALSE(t.admits(flow, 100 + kTimeout));
  // Another port, host or family is another flow.
  CHECK_FALSE(t.admits(FlowTable::key(false, 3, 40001, 7000), 200));
  CHECK_FALSE(t.admits(FlowTable::key(false, 3, 40000, 7001), 200));
  CHECK_FALSE(t.admits(FlowTable::key(false, 4, 40000, 7000), 200));
  CHECK_FALSE(t.admits(FlowTable::key(true, 3, 40000, 7000), 200));

  // A retransmitted SYN refreshes the flow; one after it expired opens it again.
  t.opened(flow, 900);
  CHECK(t.admits(flow, 900 + kTimeout - 1));
  CHECK_FALSE(t.admits(flow, 900 + kTimeout));
  t.opened(flow, 5000);
  CHECK(t.admits(flow, 5000));
  CHECK(t.evicted() == 0);
  CHECK(t.timeout_ns() == kTimeout);
  CHECK(ferry::wan::kStatefulTimeoutNs == 120'000'000'000ull);
}

TEST_CASE("a full flow table forgets the flow that expires first and never grows", "[wan][flow_table]") {
  constexpr uint64_t kTimeout = 1'000'000;
  FlowTable t(FlowTable::kWays, kTimeout);  // one bucket: every flow competes for its ways
  REQUIRE(t.capacity() == FlowTable::kWays);
  for (uint16_t i = 0; i < FlowTable::kWays; ++i) t.opened(FlowTable::key(false, 1, 1000 + i, 80), 10 + i);
  for (uint16_t i = 0; i < FlowTable::kWays; ++i) CHECK(t.admits(FlowTable::key(false, 1, 1000 + i, 80), 100));
  CHECK(t.evicted() == 0);

  // Refreshing the oldest makes the second oldest the one to go.
  t.opened(FlowTable::key(false, 1, 1000, 80), 50);
  t.opened(FlowTable::key(false, 1, 2000, 80), 60);
  CHECK(t.evicted() == 1);
  CHECK(t.admits(FlowTable::key(false, 1, 2000, 80), 60));
  CHECK(t.admits(FlowTable::key(false, 1, 1000, 80), 60));
  CHECK_FALSE(t.admits(FlowTable::key(false, 1, 1001, 80), 60));
  CHECK(t.capacity() == FlowTable::kWays);

  // Expired flows make room without forgetting anything live.
  const uint64_t later = 10 * kTimeout;
  for (uint16_t i = 0; i < FlowTable::kWays; ++i) t.opened(FlowTable::key(true, 2, 3000 + i, 443), later);
  CHECK(t.evicted() == 1);
  for (uint16_t i = 0; i < FlowTable::kWays; ++i) CHECK(t.admits(FlowTable::key(true, 2, 3000 + i, 443), later));
}

TEST_CASE("a flow table of the forwarder's size holds a host's flows without evicting", "[wan][flow_table]") {
  FlowTable t(ferry::wan::kStatefulFlows, ferry::wan::kStatefulTimeoutNs);
  CHECK(t.capacity() >= ferry::wan::kStatefulFlows);
  // A peer with 8 lanes to each of 16 neighbours, redialed 4 times: 512 flows.
  for (uint32_t host = 0; host < 16; ++host)
    for (uint16_t port = 0; port < 32; ++port) t.opened(FlowTable::key(false, host, 40000 + port, 7000), 1);
  for (uint32_t host = 0; host < 16; ++host)
    for (uint16_t port = 0; port < 32; ++port) CHECK(t.admits(FlowTable::key(false, host, 40000 + port, 7000), 2));
  CHECK(t.evicted() == 0);
}

TEST_CASE("a flow table refuses a zero capacity or timeout", "[wan][flow_table]") {
  CHECK_THROWS_AS(FlowTable(0, 1), std::invalid_argument);
  CHECK_THROWS_WITH(FlowTable(8, 0), Catch::Contains("timeout must be positive"));
}
