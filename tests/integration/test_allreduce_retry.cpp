// ferry_allreduce_multiple_with_retry: a peer leaves in the middle of a batch;
// the survivors finish every job in the smaller world, with in-place inputs
// restored before the retry, and bit-identical results.
#include <catch2/catch.hpp>

#include <latch>
#include <thread>

#include "core/hash.h"
#include "harness.h"

using namespace ferry::test;

TEST_CASE("retry: survivors finish every job after a peer leaves mid-batch", "[allreduce][retry]") {
  EmbeddedMaster master;
  const size_t jobs = 8, count = 1 << 20;
  std::vector<std::vector<float>> results(3);
  std::vector<ferry_op_info> infos(3);
  std::vector<uint64_t> hashes(3);
  std::latch formed(3);
  auto outcome = run_peers(3, [&](size_t) {
    PeerSettings settings;
    settings.max_chunk_bytes = 64 * 1024;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    formed.arrive_and_wait();
    // In place, every element 1: a job that succeeds holds the size of the world it ran in.
    std::vector<std::vector<float>> buffers(jobs, std::vector<float>(count, 1.0f));
    if (rank == 2) {
      // Take part in the first two jobs, then leave while the others are in flight.
      for (size_t j = 0; j < 2; ++j) {
        ferry_allreduce_desc desc;
        ferry_allreduce_desc_init(&desc);
        must(ferry_allreduce(comm, buffers[j].data(), buffers[j].data(), count, &desc, nullptr), "allreduce");
      }
      ferry_comm_destroy(comm);
      return;
    }
    std::vector<ferry_allreduce_job> batch(jobs);
    for (size_t j = 0; j < jobs; ++j) {
      ferry_allreduce_job_init(&batch[j]);
      batch[j].send = batch[j].recv = buffers[j].data();
      batch[j].count = count;
    }
    ferry_op_info info{};
    info.struct_size = sizeof info;
    must(ferry_allreduce_multiple_with_retry(comm, batch.data(), jobs, 2, &info), "multiple_with_retry");
    infos[rank] = info;
    for (auto& b : buffers) results[rank].push_back(b[count / 2]), hashes[rank] ^= ferry::hash_bytes(b.data(), count * 4);
    for (auto& b : buffers)
      for (float v : b)
        if (v != 2.0f && v != 3.0f) throw std::runtime_error("element is " + std::to_string(v) + ": input not restored");
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(infos[r].world_size == 2);
    CHECK(results[r][0] == 3.0f);            // done before the leave
    CHECK(results[r][jobs - 1] == 2.0f);     // finished by the retry
  }
  CHECK(results[0] == results[1]);
  CHECK(hashes[0] == hashes[1]);
}

TEST_CASE("retry: a world shrunk to one fails with a clear PEER_LOST in time, and a newcomer restores training",
          "[allreduce][retry]") {
  EmbeddedMaster master;
  const size_t jobs = 4, count = 1 << 16;
  std::latch formed(2), newcomer_may_join(1);
  ferry_result shrunk = FERRY_OK, restored = FERRY_OK;
  std::string shrunk_error;
  double shrunk_s = 0;
  ferry_op_info restored_info{};
  std::vector<float> restored_value(2);
  // The bound ferry.h states: the loss seen (a peer that left: at once), then one vote.
  PeerSettings settings;
  settings.timeout_ms = 5000;
  auto batch_of = [&](std::vector<std::vector<float>>& buffers) {
    std::vector<ferry_allreduce_job> batch(jobs);
    for (size_t j = 0; j < jobs; ++j) {
      ferry_allreduce_job_init(&batch[j]);
      batch[j].send = batch[j].recv = buffers[j].data();
      batch[j].count = count;
    }
    return batch;
  };
  auto outcome = run_peers(3, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address(), settings);
    if (who == 2) {  // the newcomer, once the world has shrunk
      newcomer_may_join.wait();
      grow_group(comm, 2);
    } else {
      grow_group(comm, 2);
      formed.arrive_and_wait();
      if (attribute(comm, FERRY_ATTR_RANK) == 1) return ferry_comm_destroy(comm);  // leaves the survivor alone
      std::vector<std::vector<float>> buffers(jobs, std::vector<float>(count, 1.0f));
      auto batch = batch_of(buffers);
      auto started = std::chrono::steady_clock::now();
      shrunk = ferry_allreduce_multiple_with_retry(comm, batch.data(), jobs, 2, nullptr);
      shrunk_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      shrunk_error = ferry_last_error();
      newcomer_may_join.count_down();
      wait_for_group(comm, 2);
    }
    // Training goes on in the restored world of two.
    std::vector<std::vector<float>> buffers(jobs, std::vector<float>(count, 1.0f));
    auto batch = batch_of(buffers);
    ferry_op_info info{};
    info.struct_size = sizeof info;
    ferry_result r = ferry_allreduce_multiple_with_retry(comm, batch.data(), jobs, 2, &info);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    if (rank == 0) {
      restored = r;
      restored_info = info;
    }
    restored_value[rank] = buffers[jobs - 1][count - 1];
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  CHECK(shrunk == FERRY_ERR_PEER_LOST);
  CHECK_THAT(shrunk_error, Catch::Contains("the group shrank to 1 peer(s), fewer than 2 needed to retry"));
  CHECK(shrunk_s < settings.timeout_ms / 1000.0);
  CHECK(restored == FERRY_OK);
  CHECK(restored_info.world_size == 2);
  CHECK(restored_value == std::vector<float>{2.0f, 2.0f});
}

TEST_CASE("retry: bad jobs are refused before anything is issued", "[allreduce][retry][api]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  std::vector<float> a(10, 1.0f);
  ferry_allreduce_job job;
  ferry_allreduce_job_init(&job);
  job.send = a.data();
  job.recv = nullptr;
  job.count = a.size();
  CHECK(ferry_allreduce_multiple_with_retry(comm, &job, 1, 1, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_allreduce_multiple_with_retry(comm, nullptr, 1, 1, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_allreduce_multiple_with_retry(comm, nullptr, 0, 1, nullptr) == FERRY_OK);
  job.recv = a.data();
  CHECK(ferry_allreduce_multiple_with_retry(comm, &job, 1, 0, nullptr) == FERRY_OK);
  CHECK(a[0] == 1.0f);  // a world of one
  ferry_comm_destroy(comm);
}
