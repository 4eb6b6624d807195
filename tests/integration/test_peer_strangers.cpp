// Attack 2 of issue 22: ~1100 idle strangers on one peer's p2p port, from
// another address (127.0.0.2), while the peer runs with 1024 descriptors
// (soft = hard, so the library cannot raise them) and a newcomer joins, which
// makes the peer build new ring links. On the old peer the strangers filled
// its descriptor table, the rebuild threw "eventfd failed" in an io thread
// that then died for good, and the peer stayed wedged. Now strangers are
// capped per source and in total, so the rebuild finds its descriptors.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"  // tools/common
#include "harness.h"
#include "peer_process_output.h"
#include "stranger_crowd.h"

using namespace ferry::test;
using ferry::tooling::Child;
using ferry::tooling::ChildSet;
using ferry::tooling::Clock;
using namespace std::chrono_literals;

namespace {

// Every successful op of `child` summed ones to its world, uniformly; `ok` counts those in a world of `world`.
bool exact_in(const Child& child, unsigned world, size_t& ok) {
  ok = 0;
  for (const OpLine& op : op_lines(child.out())) {
    if (op.kind != "op" || op.result != FERRY_OK) continue;
    if (op.value != op.world || !op.uniform) return false;
    ok += op.world == world;
  }
  return true;
}

}  // namespace

TEST_CASE("peer: a thousand idle strangers on its p2p port neither wedge it nor keep a newcomer out",
          "[peer][storm][strangers]") {
  raise_own_fd_limit();
  EmbeddedMaster master;
  ChildSet children(false);
  const uint16_t victim_port = free_loopback_port();
  auto peer_args = [&](int peers, int rounds) {
    return std::vector<std::string>{FERRY_TEST_PEER_BIN, "--master", master.address(), "--peers", std::to_string(peers),
                                    "--rounds", std::to_string(rounds), "--floats", "65536", "--admit"};
  };
  auto victim_args = peer_args(2, 100000);
  for (const char* extra : {"--fd-limit", "1024", "--p2p-port"}) victim_args.emplace_back(extra);
  victim_args.push_back(std::to_string(victim_port));
  Child& victim = children.spawn("victim", victim_args);
  Child& partner = children.spawn("partner", peer_args(2, 100000));
  std::vector<Child*> all{&victim, &partner};
  REQUIRE(children.pump_until([&] { return ok_ops(victim) >= 5 && ok_ops(partner) >= 5; }, Clock::now() + 30s));

  StrangerCrowd crowd;
  const size_t arrived = crowd.arrive(1100, "127.0.0.2", victim_port);
  children.pump_until([] { return false; }, Clock::now() + 300ms);  // let the victim meet them
  const size_t held = crowd.still_open();
  const size_t victim_fds = open_fds(victim.pid());

  auto join_started = Clock::now();
  Child& newcomer = children.spawn("newcomer", peer_args(3, 20));
  all.push_back(&newcomer);
  bool done = children.pump_until([&] { return !newcomer.running(); }, Clock::now() + 60s);
  auto join_took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - join_started);
  // The victim goes on after the newcomer has left again.
  size_t before = ok_ops(victim);
  children.pump_until([&] { return ok_ops(victim) >= before + 5 || !victim.running(); }, Clock::now() + 30s);
  INFO("strangers: " << arrived << " connected, " << held << " still open as the attacker sees it; the victim holds "
                     << victim_fds << " descriptors; the newcomer ran 20 rounds and left after "
                     << join_took.count() << " ms\n"
                     << describe(all));
  REQUIRE(arrived >= 1000);
  CHECK(victim_fds <= 1024 / 4 + 64);  // strangers get at most a quarter (it sat at the 1024 before)
  CHECK(done);
  CHECK(newcomer.exit_code() == std::optional<int>(0));
  size_t victim_in_three = 0, newcomer_in_three = 0, partner_in_three = 0;
  CHECK(exact_in(newcomer, 3, newcomer_in_three));
  CHECK(exact_in(victim, 3, victim_in_three));
  CHECK(exact_in(partner, 3, partner_in_three));
  CHECK(newcomer_in_three == 20);
  CHECK(victim_in_three >= 20);
  CHECK(victim.running());
  CHECK(ok_ops(victim) >= before + 5);
  crowd.disperse();
}
