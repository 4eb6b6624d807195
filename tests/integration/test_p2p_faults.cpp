// Faults on one p2p link between two live peers, made by the chaos proxy
// (stress/chaos/chaos_proxy.h) in front of every peer's listener: each peer
// advertises its proxy route, so every ring link to it runs through there.
#include <catch2/catch.hpp>

#include <functional>
#include <latch>
#include <string>
#include <thread>

#include "harness.h"
#include "proxied_peers.h"

using namespace ferry::test;
using ferry::chaos::ChaosProxy;

namespace {

constexpr size_t kPeers = 3, kCount = 1 << 18;

// Non-uniform, in place, one job: a retry must restore the input before it runs again.
ferry_result retried_allreduce(ferry_comm* comm, size_t who, std::vector<float>& data, ferry_op_info& info) {
  data.resize(kCount);
  for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>((i % 97) * (who + 1));
  ferry_allreduce_job job;
  ferry_allreduce_job_init(&job);
  job.send = job.recv = data.data();
  job.count = kCount;
  info = ferry_op_info{};
  info.struct_size = sizeof info;
  return ferry_allreduce_multiple_with_retry(comm, &job, 1, 1, &info);
}

// What every peer's output must be: the exact sum of kPeers ranks' inputs.
void check_sum(const std::vector<std::vector<float>>& outputs) {
  for (size_t who = 0; who < outputs.size(); ++who) {
    INFO("peer " << who);
    CHECK(outputs[who] == outputs[0]);
  }
  for (size_t i = 0; i < kCount; i += 4099) CHECK(outputs[0][i] == static_cast<float>((i % 97) * 6));
}

// What each peer's retried all-reduce did.
struct FaultRun {
  std::vector<ferry_result> results = std::vector<ferry_result>(kPeers, FERRY_ERR_INTERNAL);
  std::vector<ferry_op_info> infos = std::vector<ferry_op_info>(kPeers);
  std::vector<std::vector<float>> outputs = std::vector<std::vector<float>>(kPeers);
  std::vector<double> seconds = std::vector<double>(kPeers);
  std::string failures;
};

// The peers join and bring their links up with a small all-reduce; then
// `fault` runs (on a thread of its own), and then each peer runs
// retried_allreduce.
FaultRun run_with_fault(const std::string& master, const ProxiedPeers& net, const std::function<void()>& fault) {
  FaultRun run;
  std::latch linked(kPeers + 1), faulted(1);
  std::thread fault_maker([&] {
    linked.arrive_and_wait();
    fault();
    faulted.count_down();
  });
  auto outcome = run_peers(kPeers, [&](size_t who) {
    ferry_comm* comm = create_peer(master, net.settings[who]);
    grow_group(comm, kPeers);
    std::vector<float> warm(16, 1.0f);
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    must(ferry_allreduce(comm, warm.data(), warm.data(), warm.size(), &desc, nullptr), "allreduce");
    linked.arrive_and_wait();
    faulted.wait();
    auto started = std::chrono::steady_clock::now();
    run.results[who] = retried_allreduce(comm, who, run.outputs[who], run.infos[who]);
    run.seconds[who] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ferry_comm_destroy(comm);
  });
  fault_maker.join();
  run.failures = failures(outcome);
  return run;
}

}  // namespace

TEST_CASE("one connection of a ring link reset between collectives: the retried all-reduce succeeds, nobody evicted",
          "[allreduce][retry][fault]") {
  EmbeddedMaster master;
  ProxiedPeers net(kPeers);
  std::size_t resets = 0;
  FaultRun run = run_with_fault(master.address(), net, [&] { resets = net.proxy.reset(net.routes[0], 1); });
  REQUIRE(run.failures == "");
  CHECK(resets == 1);  // one of the two connections into peer 0
  for (size_t who = 0; who < kPeers; ++who) {
    INFO("peer " << who);
    CHECK(run.results[who] == FERRY_OK);
    CHECK(run.infos[who].world_size == kPeers);  // nobody was evicted for a reset connection
  }
  check_sum(run.outputs);
}

TEST_CASE("a ring link black-holed while the master link stays up: seen at the progress deadline, the ring re-forms",
          "[allreduce][retry][fault]") {
  EmbeddedMaster master;
  ProxiedPeers net(kPeers);
  for (auto& s : net.settings) s.progress_timeout_ms = 2000;  // timeout_ms stays 20 s: the stall must be seen first
  std::size_t holes = 0;
  // Every connection into peer 0 now carries nothing, and stays open.
  FaultRun run = run_with_fault(master.address(), net, [&] { holes = net.proxy.blackhole(net.routes[0]); });
  REQUIRE(run.failures == "");
  CHECK(holes >= 1);
  for (size_t who = 0; who < kPeers; ++who) {
    INFO("peer " << who);
    CHECK(run.results[who] == FERRY_OK);
    CHECK(run.infos[who].world_size == kPeers);  // the new links (new connections) carry again: nobody evicted
    // The stall ends at progress_timeout_ms (2 s), not at timeout_ms (20 s); generous for a loaded machine.
    CHECK(run.seconds[who] < 15.0);
  }
  check_sum(run.outputs);
}
