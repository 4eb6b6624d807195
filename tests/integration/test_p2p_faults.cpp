// Faults on one p2p link between two live peers, made by the chaos proxy
// (stress/chaos/chaos_proxy.h) in front of every peer's listener: each peer
// advertises its proxy route, so every ring link to it runs through there.
#include <catch2/catch.hpp>

#include <latch>
#include <thread>

#include "chaos_proxy.h"
#include "harness.h"
#include "stranger_crowd.h"  // free_loopback_port

using namespace ferry::test;
using ferry::chaos::ChaosProxy;

TEST_CASE("one connection of a ring link reset between collectives: the retried all-reduce succeeds, nobody evicted",
          "[allreduce][retry][fault]") {
  EmbeddedMaster master;
  ChaosProxy proxy(1);
  constexpr size_t kPeers = 3, kCount = 1 << 18;
  std::vector<PeerSettings> settings(kPeers);
  std::vector<uint16_t> routes(kPeers);
  for (size_t i = 0; i < kPeers; ++i) {
    settings[i].shared_memory = 0;  // every byte through the proxy
    settings[i].port = free_loopback_port();
    routes[i] = proxy.add_route(settings[i].port);
    settings[i].advertised_port = routes[i];
  }
  std::latch linked(kPeers + 1), reset_done(1);
  std::vector<ferry_result> results(kPeers, FERRY_ERR_INTERNAL);
  std::vector<ferry_op_info> infos(kPeers);
  std::vector<std::vector<float>> outputs(kPeers);
  std::size_t resets = 0;
  std::thread resetter([&] {
    linked.arrive_and_wait();
    resets = proxy.reset(routes[0], 1);  // one of the two connections into peer 0
    reset_done.count_down();
  });
  auto outcome = run_peers(kPeers, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address(), settings[who]);
    grow_group(comm, kPeers);
    std::vector<float> warm(16, 1.0f);
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    must(ferry_allreduce(comm, warm.data(), warm.data(), warm.size(), &desc, nullptr), "allreduce");  // links up
    linked.arrive_and_wait();
    reset_done.wait();
    // Non-uniform and in place: a retry must restore the input before it runs again.
    std::vector<float> data(kCount);
    for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>((i % 97) * (who + 1));
    ferry_allreduce_job job;
    ferry_allreduce_job_init(&job);
    job.send = job.recv = data.data();
    job.count = kCount;
    infos[who].struct_size = sizeof infos[who];
    results[who] = ferry_allreduce_multiple_with_retry(comm, &job, 1, 1, &infos[who]);
    outputs[who] = std::move(data);
    ferry_comm_destroy(comm);
  });
  resetter.join();
  REQUIRE(failures(outcome) == "");
  CHECK(resets == 1);
  for (size_t who = 0; who < kPeers; ++who) {
    INFO("peer " << who);
    CHECK(results[who] == FERRY_OK);
    CHECK(infos[who].world_size == kPeers);  // nobody was evicted for a reset connection
    CHECK(outputs[who] == outputs[0]);
  }
  for (size_t i = 0; i < kCount; i += 4099) CHECK(outputs[0][i] == static_cast<float>((i % 97) * 6));
}
