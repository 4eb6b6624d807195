// What a ferry-master process logs for an operator: the summary it writes
// once when it stops (master_stats.h), read from its stderr after SIGTERM,
// with the figures of a run of two ferry-test-peer processes.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"  // tools/common
#include "master_process.h"

using namespace ferry::test;
using ferry::tooling::Child;
using ferry::tooling::ChildSet;
using ferry::tooling::Clock;

TEST_CASE("ferry-master on SIGTERM logs one summary line: run time, verdicts by result, bytes reduced, joins and leaves",
          "[process][master]") {
  ChildSet children(false);
  const MasterProcess master = start_master(children, 0, "info");
  std::vector<Child*> peers;
  for (int i = 0; i < 2; ++i)
    peers.push_back(&children.spawn("peer " + std::to_string(i),
                                    {FERRY_TEST_PEER_BIN, "--master", master.address, "--peers", "2", "--rounds", "3",
                                     "--floats", "16"}));
  const bool finished = children.pump_until(
      [&] { return std::none_of(peers.begin(), peers.end(), [](const Child* p) { return p->running(); }); },
      Clock::now() + std::chrono::seconds(60));
  INFO("master:\n" << master.child->err_tail(40));
  REQUIRE(finished);
  for (const Child* p : peers) REQUIRE(p->exit_code() == std::optional<int>(0));
  // Both left: the master has counted their leaves by the time it answers nothing more.
  REQUIRE(children.pump_until(
      [&] {
        const std::string err = master.child->err_tail(400);
        size_t leaves = 0;
        for (size_t at = 0; (at = err.find("): left", at)) != std::string::npos; ++at) ++leaves;
        return leaves == 2;
      },
      Clock::now() + std::chrono::seconds(10)));

  REQUIRE(::kill(master.child->pid(), SIGTERM) == 0);
  REQUIRE(children.pump_until([&] { return !master.child->running(); }, Clock::now() + std::chrono::seconds(15)));
  CHECK(master.child->exit_code() == std::optional<int>(0));
  std::vector<std::string> summaries;
  std::istringstream err(master.child->err_tail(400));
  for (std::string line; std::getline(err, line);)
    if (line.find("summary: ") != std::string::npos) summaries.push_back(line);
  REQUIRE(summaries.size() == 1);
  const std::string& summary = summaries[0];
  CHECK_THAT(summary, Catch::Contains("[ferry info] summary: ran "));
  // Three all-reduces of 16 f32 (64 bytes each), none aborted.
  CHECK_THAT(summary, Catch::Contains("; collectives 3 committed, 0 aborted; 192 B reduced; "));
  CHECK_THAT(summary, Catch::Contains("; peers 2 joined, 0 resumed, 2 left, 0 lost, 0 kicked;"));
}
