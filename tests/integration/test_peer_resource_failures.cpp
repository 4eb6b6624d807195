// A peer that runs out of a local resource must fail loudly, never wedge.
// On 0.x a full descriptor table at a ring rebuild threw ("eventfd failed")
// out of an io thread's handler: the thread ended for good, the peer stopped
// heartbeating, was dropped, and lived on doing nothing, every call waiting
// out its deadline. Now the rebuild fails with the cause, the master removes
// the peer that cannot build its links, that peer's caller gets the error
// (and ferry-test-peer exits 3), and the others go on with exact results.
//
// Each peer is a ferry-test-peer process; the starving one caps its own
// RLIMIT_NOFILE (--fd-limit, so the library cannot raise it) and fills its
// table just before the admission that rebuilds the ring (--starve-fds-on-admit).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"  // tools/common
#include "harness.h"
#include "peer_process_output.h"
#include "sanitized_build.h"

using namespace ferry::test;
using ferry::tooling::Child;
using ferry::tooling::ChildSet;
using ferry::tooling::Clock;

namespace {

// When the peer reported its descriptor table full ("starved fds=N t=T"), and N.
struct Starved {
  size_t fds = 0;
  double t = 0;
};

std::optional<Starved> starved_report(const Child& child) {
  std::istringstream in(child.out());
  for (std::string line; std::getline(in, line);) {
    Starved s;
    if (std::sscanf(line.c_str(), "starved fds=%zu t=%lf", &s.fds, &s.t) == 2) return s;
  }
  return std::nullopt;
}

size_t ok_ops_in(const Child& child, unsigned world, double after_t) {
  auto ops = op_lines(child.out());
  return static_cast<size_t>(std::count_if(ops.begin(), ops.end(), [&](const OpLine& op) {
    return op.kind == "op" && op.result == FERRY_OK && op.world == world && op.t >= after_t;
  }));
}

}  // namespace

TEST_CASE("a peer whose descriptor table is full at a ring rebuild fails with the cause and ends, the others go on",
          "[process][failure][resources]") {
  if (kProbesMemoryThroughPipes)
    return report_skipped("a full descriptor table makes the sanitizers' own memory probes fail (sanitized_build.h)");
  const int io_threads = GENERATE(1, 2);
  INFO("io threads: " << io_threads);
  EmbeddedMaster master;
  ChildSet children(false);
  auto argv = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {FERRY_TEST_PEER_BIN, "--master", master.address(), "--peers", "3", "--rounds",
                                  "100000", "--floats", "65536", "--admit", "--io-threads", std::to_string(io_threads),
                                  "--heartbeat-ms", "2000", "--timeout-ms", "20000"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  // 128 descriptors are plenty for a peer of two lanes; the hog holds them past the rebuild.
  Child& starved = children.spawn("starved peer", argv({"--fd-limit", "128", "--starve-fds-on-admit", "3000"}));
  Child& a = children.spawn("peer a", argv({}));
  Child& b = children.spawn("peer b", argv({}));
  std::vector<Child*> group{&starved, &a, &b};
  auto all_ran = [&](const std::vector<Child*>& peers, double after_t) {
    return std::all_of(peers.begin(), peers.end(), [&](const Child* p) { return ok_ops_in(*p, 3, after_t) >= 2; });
  };
  REQUIRE(children.pump_until([&] { return all_ran(group, 0); }, Clock::now() + std::chrono::seconds(60)));

  // A newcomer makes every peer admit it: the starving peer fills its table, then votes the rebuild.
  Child& joiner = children.spawn("joiner", argv({}));
  group.push_back(&joiner);
  std::vector<Child*> others{&a, &b, &joiner};
  // Well inside the 20 s link deadline: on 0.x the starving peer never ends.
  const bool settled = children.pump_until(
      [&] {
        auto report = starved_report(starved);
        return report && !starved.running() && all_ran(others, report->t);
      },
      Clock::now() + std::chrono::seconds(15));
  INFO(describe(group));
  REQUIRE(settled);
  CHECK(starved_report(starved)->fds > 0);
  // Removed by the master for the links it could not build (fatal: it exits 3), and told why.
  CHECK(starved.exit_code() == std::optional<int>(3));
  CHECK(starved.err_tail(20).find("Too many open files") != std::string::npos);
  // Every all-reduce anyone completed summed ones over the world it ran in.
  size_t exact = 0, inexact = 0;
  for (const Child* p : group)
    for (const OpLine& op : op_lines(p->out()))
      if (op.kind == "op" && op.result == FERRY_OK) ++(op.value == op.world && op.uniform ? exact : inexact);
  CHECK(exact > 0);
  CHECK(inexact == 0);
}
