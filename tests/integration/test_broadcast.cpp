// ferry_barrier and ferry_broadcast: real peers on loopback through the C API.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "harness.h"

using namespace ferry::test;

namespace {

std::vector<ferry_comm*> group_of(EmbeddedMaster& master, size_t n) {
  std::vector<ferry_comm*> comms(n);
  REQUIRE(failures(run_peers(n, [&](size_t who) {
            comms[who] = create_peer(master.address());
            must(ferry_connect(comms[who]), "ferry_connect");
            must(ferry_wait_for_world(comms[who], static_cast<uint32_t>(n), 0), "ferry_wait_for_world");
          })) == "");
  return comms;
}

// Bytes no float sum would keep: negative zeros, NaNs with payloads, infinities, denormals.
std::vector<uint8_t> awkward_bytes(size_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  std::mt19937_64 rng(seed);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  const float specials[] = {-0.0f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min()};
  for (size_t i = 0; i + sizeof(float) <= bytes && i < 64; i += sizeof(float))
    std::memcpy(out.data() + i, &specials[(i / sizeof(float)) % 4], sizeof(float));
  return out;
}

}  // namespace

TEST_CASE("broadcast: the root's bytes arrive bit for bit on every peer, whatever the others held",
          "[broadcast]") {
  EmbeddedMaster master;
  auto comms = group_of(master, 3);
  for (size_t bytes : {size_t{1}, size_t{7}, size_t{4096}, size_t{(3u << 20) + 5}}) {
    for (uint32_t root : {0u, 2u}) {
      INFO("bytes " << bytes << ", root " << root);
      const std::vector<uint8_t> expected = awkward_bytes(bytes, bytes * 7 + root);
      std::vector<std::vector<uint8_t>> buffers(3);
      std::vector<ferry_op_info> infos(3);
      REQUIRE(failures(run_peers(3, [&](size_t who) {
                const auto rank = static_cast<uint32_t>(attribute(comms[who], FERRY_ATTR_RANK));
                buffers[who] = rank == root ? expected : awkward_bytes(bytes, 1000 + who);  // garbage elsewhere
                infos[who].struct_size = sizeof(ferry_op_info);
                must(ferry_broadcast(comms[who], buffers[who].data(), bytes, root, &infos[who]), "ferry_broadcast");
              })) == "");
      for (size_t who = 0; who < 3; ++who) {
        CHECK(buffers[who] == expected);
        CHECK(infos[who].world_size == 3);
      }
    }
  }
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
}

TEST_CASE("broadcast: a root outside the group, differing roots or sizes, and a broadcast against an all-reduce",
          "[broadcast]") {
  EmbeddedMaster master;
  auto comms = group_of(master, 2);
  std::vector<uint8_t> buffer(16, 1);
  CHECK(ferry_broadcast(comms[0], buffer.data(), buffer.size(), 2, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("root 2 is not a rank of this group of 2"));
  CHECK(ferry_broadcast(comms[0], nullptr, 16, 0, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_broadcast(nullptr, buffer.data(), 16, 0, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_barrier(nullptr) == FERRY_ERR_INVALID_ARGUMENT);

  std::vector<ferry_result> results(2);
  std::vector<std::string> messages(2);
  auto both = [&](const std::function<ferry_result(size_t who, std::vector<uint8_t>& mine)>& call) {
    REQUIRE(failures(run_peers(2, [&](size_t who) {
              std::vector<uint8_t> mine(16, static_cast<uint8_t>(who));
              results[who] = call(who, mine);
              messages[who] = ferry_last_error();
            })) == "");
  };
  SECTION("roots differ") {
    both([&](size_t who, std::vector<uint8_t>& mine) {
      return ferry_broadcast(comms[who], mine.data(), mine.size(), static_cast<uint32_t>(who), nullptr);
    });
    CHECK_THAT(messages[0], Catch::Contains("root 0 vs 1") || Catch::Contains("root 1 vs 0"));
  }
  SECTION("sizes differ") {
    both([&](size_t who, std::vector<uint8_t>& mine) {
      return ferry_broadcast(comms[who], mine.data(), 8 + who, 0, nullptr);
    });
    CHECK_THAT(messages[0], Catch::Contains("bytes 8 vs 9") || Catch::Contains("bytes 9 vs 8"));
  }
  SECTION("one broadcasts, the other all-reduces") {
    both([&](size_t who, std::vector<uint8_t>& mine) {
      if (who == 0) return ferry_broadcast(comms[0], mine.data(), mine.size(), 0, nullptr);
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      desc.dtype = FERRY_U8;
      return ferry_allreduce(comms[1], mine.data(), mine.data(), mine.size(), &desc, nullptr);
    });
    CHECK_THAT(messages[0], Catch::Contains("kind broadcast vs all_reduce") ||
                                Catch::Contains("kind all_reduce vs broadcast"));
  }
  CHECK(results == std::vector<ferry_result>{FERRY_ERR_MISMATCH, FERRY_ERR_MISMATCH});
  CHECK(messages[0] == messages[1]);
  // Both carry on.
  REQUIRE(failures(run_peers(2, [&](size_t who) { must(ferry_barrier(comms[who]), "ferry_barrier"); })) == "");
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
}

TEST_CASE("barrier: no peer leaves it before the last one has entered", "[broadcast][barrier]") {
  EmbeddedMaster master;
  auto comms = group_of(master, 3);
  for (size_t late = 0; late < 3; ++late) {
    std::atomic<bool> late_entered{false};
    std::vector<int> saw_late(3, 0);
    REQUIRE(failures(run_peers(3, [&](size_t who) {
              if (who == late) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));  // busy elsewhere
                late_entered = true;
              }
              must(ferry_barrier(comms[who]), "ferry_barrier");
              saw_late[who] = late_entered.load() ? 1 : 0;
            })) == "");
    CHECK(saw_late == std::vector<int>{1, 1, 1});
  }
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
}
