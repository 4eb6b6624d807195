// A peer SIGKILLed after the other members ended a collective and before the
// master's commit, inside ferry_allreduce_multiple_with_retry, on in-place,
// non-uniform data: the survivors' buffers already hold the three-peer result
// when the master aborts, so the retry must restore their inputs before it
// runs again in the world of two.
// How the kill lands in that window every time: the doomed peer (a
// ferry-test-peer process) reaches the master through a chaos-proxy route
// that delays every byte by kDelay, so its end arrives that much after the
// others'. The master logs each end (at debug level); once two of three have
// ended, the test drops the route, the doomed end still in it, and kills the peer.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "chaos_proxy.h"
#include "child_process.h"  // tools/common
#include "harness.h"
#include "master_process.h"
#include "peer_process_output.h"

using namespace ferry::test;
using ferry::chaos::ChaosProxy;
using ferry::chaos::ProxyClock;
using ferry::chaos::RouteShaping;
using ferry::tooling::Child;
using ferry::tooling::ChildSet;
using ferry::tooling::Clock;

namespace {

constexpr size_t kFloats = 1 << 20;
constexpr auto kDelay = std::chrono::milliseconds(500);

// Survivor `who`'s input: differs from element to element and from the other survivor's.
float survivor_input(size_t who, size_t i) { return static_cast<float>((i % 97) * (who + 1)); }

// The jobs ferry-test-peer --mode retry runs (four quarters of its buffer, in
// place, two in flight), on `data`.
ferry_result retried_quarters(ferry_comm* comm, std::vector<float>& data, ferry_op_info& info) {
  std::vector<ferry_allreduce_job> jobs(4);
  const size_t quarter = data.size() / 4;
  for (size_t j = 0; j < jobs.size(); ++j) {
    ferry_allreduce_job_init(&jobs[j]);
    jobs[j].send = jobs[j].recv = data.data() + j * quarter;
    jobs[j].count = j + 1 < jobs.size() ? quarter : data.size() - 3 * quarter;
  }
  info = ferry_op_info{};
  info.struct_size = sizeof info;
  return ferry_allreduce_multiple_with_retry(comm, jobs.data(), jobs.size(), 2, &info);
}

}  // namespace

TEST_CASE("a peer SIGKILLed after the others ended and before the commit: the retry restores the in-place inputs "
          "and gives the smaller world's exact sum",
          "[process][failure][retry]") {
  ChildSet children(false);
  const MasterProcess master = start_master(children, 0, "debug");
  ChaosProxy proxy(1);
  const uint16_t route = proxy.add_route(master.port);
  proxy.shape(route, RouteShaping{kDelay, 0}, ProxyClock::now() + std::chrono::hours(1));
  Child& doomed =
      children.spawn("doomed peer", {FERRY_TEST_PEER_BIN, "--master", "127.0.0.1:" + std::to_string(route), "--peers",
                                     "3", "--rounds", "1", "--floats", std::to_string(kFloats), "--mode", "retry"});

  std::vector<std::vector<float>> outputs(2, std::vector<float>(kFloats));
  std::vector<ferry_result> results(2, FERRY_ERR_INTERNAL);
  std::vector<ferry_op_info> infos(2);
  std::string survivor_failures;
  std::atomic<bool> survivors_done{false};
  std::thread survivors([&] {
    survivor_failures = failures(run_peers(2, [&](size_t who) {
      ferry_comm* comm = create_peer(master.address);
      grow_group(comm, 3);
      for (size_t i = 0; i < kFloats; ++i) outputs[who][i] = survivor_input(who, i);
      results[who] = retried_quarters(comm, outputs[who], infos[who]);
      ferry_comm_destroy(comm);
    }));
    survivors_done = true;
  });

  // The survivors' ends, logged by the master while the doomed peer's is still on its way.
  const bool window = children.pump_until(
      [&] {
        return survivors_done || !doomed.running() ||
               master.child->err_tail(200).find("ended, 2 of 3 members") != std::string::npos;
      },
      Clock::now() + std::chrono::seconds(60));
  proxy.reset(route);
  ::kill(doomed.pid(), SIGKILL);
  children.pump_until([&] { return survivors_done.load(); }, Clock::now() + std::chrono::seconds(60));
  // A hung survivor ends at its own deadlines (timeout_ms); then the checks say what happened.
  survivors.join();
  INFO("doomed peer:\n" << doomed.out() << doomed.err_tail(20) << "--- master:\n" << master.child->err_tail(40));
  REQUIRE(window);
  REQUIRE(survivor_failures.empty());
  // It never heard a verdict: killed between its end and the commit.
  CHECK(op_lines(doomed.out()).empty());
  CHECK_THAT(master.child->err_tail(400), Catch::Contains("aborted"));
  for (size_t who = 0; who < 2; ++who) {
    INFO("survivor " << who);
    CHECK(results[who] == FERRY_OK);
    CHECK(infos[who].world_size == 2);
    size_t wrong = 0, first_wrong = kFloats;
    for (size_t i = 0; i < kFloats; ++i)
      if (outputs[who][i] != survivor_input(0, i) + survivor_input(1, i) && wrong++ == 0) first_wrong = i;
    INFO("first wrong element " << first_wrong << ": " << (wrong ? outputs[who][first_wrong] : 0.0f));
    CHECK(wrong == 0);
  }
}
