// ferry_all_gather: real peers on loopback through the C API. Every member's
// bytes (its own length, zero and one byte included) reach every member in
// rank order, bit for bit; over TCP, TLS and shared memory; async beside
// all-reduces; a mismatched call refused; a member lost mid-way fails it on
// every survivor with no result, and the retry in the smaller world succeeds.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.h"
#include "harness.h"
#include "proxied_peers.h"
#include "sanitized_build.h"

using namespace ferry::test;

namespace {

uint64_t mix(uint64_t a, uint64_t b = 0) {
  const uint64_t words[2] = {a, b};
  return ferry::hash_bytes(words, sizeof words);
}

// Rank `rank`'s contribution in case `seed`: its length comes from size_of(rank).
std::vector<uint8_t> contribution(uint64_t seed, uint32_t rank, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(mix(seed * 131 + rank, i / 8) >> (i % 8 * 8));
  return out;
}

std::vector<ferry_comm*> group_of(EmbeddedMaster& master, size_t n, const PeerSettings& settings = {}) {
  std::vector<ferry_comm*> comms(n);
  REQUIRE(failures(run_peers(n, [&](size_t who) {
            comms[who] = create_peer(master.address(), settings);
            must(ferry_connect(comms[who]), "ferry_connect");
            must(ferry_wait_for_world(comms[who], static_cast<uint32_t>(n), 0), "ferry_wait_for_world");
          })) == "");
  return comms;
}

ferry_all_gather_desc gather_desc(uint64_t tag = 0) {
  ferry_all_gather_desc desc;
  ferry_all_gather_desc_init(&desc);
  desc.tag = tag;
  return desc;
}

// What one peer saw of one all-gather: every part, by rank, and the whole.
struct Seen {
  std::vector<std::vector<uint8_t>> parts;
  std::vector<uint8_t> whole;
  ferry_op_info info{};
};

// Reads a result out (throws CallFailed when it cannot be read) and frees it.
Seen read_result(ferry_gathered* result) {
  Seen seen;
  uint32_t members = 0;
  const void* data = nullptr;
  size_t total = 0;
  must(ferry_gathered_layout(result, &members, &data, &total), "ferry_gathered_layout");
  seen.whole.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + total);
  for (uint32_t r = 0; r < members; ++r) {
    const void* part = nullptr;
    size_t bytes = 0;
    must(ferry_gathered_part(result, r, &part, &bytes), "ferry_gathered_part");
    seen.parts.emplace_back(static_cast<const uint8_t*>(part), static_cast<const uint8_t*>(part) + bytes);
  }
  ferry_gathered_destroy(result);
  return seen;
}

// One all-gather on every peer of `comms`, rank r contributing size_of(r) bytes;
// checks every peer got every contribution, in rank order.
void gather_and_check(const std::vector<ferry_comm*>& comms, uint64_t seed,
                      const std::function<size_t(uint32_t rank)>& size_of) {
  const size_t n = comms.size();
  std::vector<Seen> seen(n);
  REQUIRE(failures(run_peers(n, [&](size_t who) {
            const auto rank = static_cast<uint32_t>(attribute(comms[who], FERRY_ATTR_RANK));
            const auto mine = contribution(seed, rank, size_of(rank));
            const auto desc = gather_desc(seed);
            ferry_gathered* result = nullptr;
            ferry_op_info info{};
            info.struct_size = sizeof info;
            must(ferry_all_gather(comms[who], mine.data(), mine.size(), &desc, &result, &info), "ferry_all_gather");
            seen[who] = read_result(result);
            seen[who].info = info;
          })) == "");
  std::vector<uint8_t> whole;
  uint64_t others_total = 0;
  for (uint32_t r = 0; r < n; ++r) {
    auto part = contribution(seed, r, size_of(r));
    whole.insert(whole.end(), part.begin(), part.end());
  }
  for (size_t who = 0; who < n; ++who) {
    INFO("peer " << who << " of " << n << ", case " << seed);
    REQUIRE(seen[who].parts.size() == n);
    for (uint32_t r = 0; r < n; ++r) CHECK(seen[who].parts[r] == contribution(seed, r, size_of(r)));
    CHECK(seen[who].whole == whole);
    CHECK(seen[who].info.world_size == n);
    const auto rank = static_cast<uint32_t>(attribute(comms[who], FERRY_ATTR_RANK));
    others_total = whole.size() - size_of(rank);
    CHECK(seen[who].info.bytes_received == others_total);  // each other contribution once, nothing more
  }
}

// Size patterns, one a case: zeros, single bytes, mixed with zeros, chunks of every length.
std::vector<std::function<size_t(uint32_t)>> size_patterns() {
  return {
      [](uint32_t) { return size_t{0}; },
      [](uint32_t) { return size_t{1}; },
      [](uint32_t r) { return size_t{r % 3 == 0 ? 0u : r % 3 == 1 ? 1u : 4096u + r}; },
      [](uint32_t r) { return static_cast<size_t>(mix(r + 17) % (300 << 10)); },
      [](uint32_t r) { return r == 0 ? size_t{(3u << 20) + 5} : size_t{0}; },  // one big, the rest nothing
      [](uint32_t r) { return size_t{(1u << 20) + 3 * r}; },                  // chunk edges: 1 MiB chunks
  };
}

void destroy_all(const std::vector<ferry_comm*>& comms) {
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
}

}  // namespace

TEST_CASE("all_gather: 1..8 peers, contributions of every size (0 and 1 byte included), in rank order everywhere",
          "[all_gather]") {
  // A world of one (nothing moves) and the sweep of sanitized_build.h: every size in Release,
  // 2, 5 and 8 under the sanitizers (there it took 218 s of TSan's 639).
  std::vector<size_t> worlds = swept_world_sizes({2, 3, 4, 5, 6, 7, 8});
  worlds.insert(worlds.begin(), 1);
  const size_t n = GENERATE_COPY(from_range(worlds));
  INFO(n << " peers");
  EmbeddedMaster master;
  auto comms = group_of(master, n);
  uint64_t seed = 100 * n;
  for (const auto& size_of : size_patterns()) gather_and_check(comms, ++seed, size_of);
  destroy_all(comms);
}

TEST_CASE("all_gather: over TLS and over shared memory, the same bytes as over TCP", "[all_gather][tls][shm]") {
  const Wire wire = GENERATE(Wire::tls, Wire::shm);
  WireScope scope(wire);
  INFO(wire_name(wire));
  EmbeddedMaster master;
  auto comms = group_of(master, 3);
  if (wire == Wire::shm) {
    for (ferry_comm* comm : comms) CHECK(attribute(comm, FERRY_ATTR_SHARED_MEMORY_LANES) > 0);
  }
  uint64_t seed = wire == Wire::tls ? 900 : 950;
  for (const auto& size_of : size_patterns()) gather_and_check(comms, ++seed, size_of);
  destroy_all(comms);
}

TEST_CASE("all_gather: async all-gathers interleaved with async all-reduces, waited out of order",
          "[all_gather][async]") {
  EmbeddedMaster master;
  auto comms = group_of(master, 3);
  constexpr int kPairs = 4;
  constexpr size_t kFloats = 50'000;
  auto size_of = [](uint32_t rank, int k) { return static_cast<size_t>(k * 70'001 + rank * 13 + (k == 1 ? 0 : 1)); };
  std::vector<std::vector<Seen>> seen(3, std::vector<Seen>(kPairs));
  std::vector<std::vector<std::vector<float>>> sums(3, std::vector<std::vector<float>>(kPairs));
  REQUIRE(failures(run_peers(3, [&](size_t who) {
            const auto rank = static_cast<uint32_t>(attribute(comms[who], FERRY_ATTR_RANK));
            std::vector<std::vector<uint8_t>> mine(kPairs);
            std::vector<ferry_gathered*> results(kPairs);
            std::vector<ferry_op*> ops;  // gather k at 2k, all-reduce k at 2k+1
            auto reduce_desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, FERRY_QUANT_NONE, 7);
            for (int k = 0; k < kPairs; ++k) {
              mine[k] = contribution(k, rank, size_of(rank, k));
              const auto desc = gather_desc(k);
              ferry_op* op = nullptr;
              must(ferry_all_gather_async(comms[who], mine[k].data(), mine[k].size(), &desc, &results[k], &op),
                   "ferry_all_gather_async");
              ops.push_back(op);
              sums[who][k].assign(kFloats, static_cast<float>(rank + k));
              must(ferry_allreduce_async(comms[who], sums[who][k].data(), sums[who][k].data(), kFloats, &reduce_desc,
                                         &op),
                   "ferry_allreduce_async");
              ops.push_back(op);
            }
            for (size_t i = ops.size(); i-- > 0;) must(ferry_op_wait(ops[i], nullptr), "ferry_op_wait");
            for (int k = 0; k < kPairs; ++k) seen[who][k] = read_result(results[k]);
          })) == "");
  for (size_t who = 0; who < 3; ++who)
    for (int k = 0; k < kPairs; ++k) {
      INFO("peer " << who << ", pair " << k);
      REQUIRE(seen[who][k].parts.size() == 3);
      for (uint32_t r = 0; r < 3; ++r) CHECK(seen[who][k].parts[r] == contribution(k, r, size_of(r, k)));
      CHECK(sums[who][k] == std::vector<float>(kFloats, static_cast<float>(3 + 3 * k)));  // 0+1+2 + 3k
    }
  destroy_all(comms);
}

TEST_CASE("all_gather: a call that does not match is refused on every peer, and the group carries on",
          "[all_gather][mismatch]") {
  EmbeddedMaster master;
  auto comms = group_of(master, 2);
  std::vector<ferry_result> results(2);
  std::vector<std::string> messages(2);
  std::vector<ferry_gathered*> gathered(2, nullptr);
  auto both = [&](const std::function<ferry_result(size_t who, std::vector<uint8_t>& mine)>& call) {
    REQUIRE(failures(run_peers(2, [&](size_t who) {
              std::vector<uint8_t> mine(16 + who, static_cast<uint8_t>(who));
              results[who] = call(who, mine);
              messages[who] = ferry_last_error();
            })) == "");
  };
  SECTION("tags differ") {
    both([&](size_t who, std::vector<uint8_t>& mine) {
      const auto desc = gather_desc(1 + who);
      return ferry_all_gather(comms[who], mine.data(), mine.size(), &desc, &gathered[who], nullptr);
    });
    CHECK_THAT(messages[0], Catch::Contains("tag 1 vs 2") || Catch::Contains("tag 2 vs 1"));
  }
  SECTION("one all-gathers, the other all-reduces") {
    both([&](size_t who, std::vector<uint8_t>& mine) {
      if (who == 0) {
        const auto desc = gather_desc();
        return ferry_all_gather(comms[0], mine.data(), mine.size(), &desc, &gathered[0], nullptr);
      }
      auto desc = allreduce_desc(FERRY_U8, FERRY_OP_SUM);
      return ferry_allreduce(comms[1], mine.data(), mine.data(), mine.size(), &desc, nullptr);
    });
    CHECK_THAT(messages[0], Catch::Contains("kind all_gather vs all_reduce") ||
                                Catch::Contains("kind all_reduce vs all_gather"));
  }
  CHECK(results == std::vector<ferry_result>{FERRY_ERR_MISMATCH, FERRY_ERR_MISMATCH});
  CHECK(messages[0] == messages[1]);
  CHECK(gathered == std::vector<ferry_gathered*>{nullptr, nullptr});  // no result on failure
  // Different sizes are no mismatch: the group carries on with them.
  gather_and_check(comms, 77, [](uint32_t rank) { return size_t{rank == 0 ? 5u : 0u}; });
  destroy_all(comms);
}

TEST_CASE("all_gather: a peer lost mid-way fails it on every survivor, with no result, and the retry succeeds",
          "[all_gather][faults]") {
  // Every ring link through the chaos proxy at 16 MB/s per connection; the victim is lost once
  // the proxy relayed 6 MiB of the 24 MiB the ring moves (whole chunks have arrived, most are to
  // come): mid-transfer however slowly the master agrees the call, where a fixed 150 ms after
  // issuing failed CI's loaded ASan run.
  constexpr size_t kBytes = 4u << 20;
  ProxiedPeers net(3);
  EmbeddedMaster master;
  std::vector<ferry_comm*> comms(3);
  REQUIRE(failures(run_peers(3, [&](size_t who) {
            comms[who] = create_peer(master.address(), net.settings[who]);
            must(ferry_connect(comms[who]), "ferry_connect");
            must(ferry_wait_for_world(comms[who], 3, 0), "ferry_wait_for_world");
          })) == "");
  for (uint16_t route : net.routes)
    net.proxy.shape(route, {std::chrono::milliseconds(0), 16u << 20},
                    ferry::chaos::ProxyClock::now() + std::chrono::seconds(30));
  std::vector<ferry_result> results(3, FERRY_OK);
  std::vector<ferry_op_info> infos(3);
  std::vector<int> readable(3, -1);
  size_t victim = 0;
  for (size_t who = 0; who < 3; ++who)
    if (attribute(comms[who], FERRY_ATTR_RANK) == 1) victim = who;
  const uint64_t relayed_before = net.proxy.stats().bytes;
  bool saw_transfer = false;
  REQUIRE(failures(run_peers(3, [&](size_t who) {
            const auto rank = static_cast<uint32_t>(attribute(comms[who], FERRY_ATTR_RANK));
            const auto mine = contribution(5, rank, kBytes);
            const auto desc = gather_desc(5);
            ferry_gathered* result = nullptr;
            ferry_op* op = nullptr;
            must(ferry_all_gather_async(comms[who], mine.data(), mine.size(), &desc, &result, &op),
                 "ferry_all_gather_async");
            if (who == victim) {
              const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
              while (!(saw_transfer = net.proxy.stats().bytes > relayed_before + (6u << 20)) &&
                     std::chrono::steady_clock::now() < deadline)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
              ferry_comm_abort(comms[who]);  // as a kill looks to the others: links close, the master hears it
            }
            infos[who].struct_size = sizeof(ferry_op_info);
            results[who] = ferry_op_wait(op, &infos[who]);
            readable[who] = ferry_gathered_layout(result, nullptr, nullptr, nullptr) == FERRY_OK;
            ferry_gathered_destroy(result);
          })) == "");
  REQUIRE(saw_transfer);
  uint64_t moved = 0;
  for (size_t who = 0; who < 3; ++who) {
    INFO("peer " << who << (who == victim ? " (the victim)" : ""));
    CHECK(results[who] != FERRY_OK);
    CHECK(readable[who] == 0);  // never a partial result
    if (who != victim) {
      CHECK(results[who] == FERRY_ERR_PEER_LOST);
      CHECK(ferry_result_is_retryable(results[who]) == 1);
      CHECK(infos[who].bytes_received < 2 * kBytes);
      moved += infos[who].bytes_sent + infos[who].bytes_received;
    }
  }
  // It failed mid-way, not before the first byte. Sent counts too: both count whole chunks only,
  // and under TSan the proxy's 6 MiB sat in the survivors' receive buffers, no chunk whole yet.
  CHECK(moved > 0);
  net.proxy.heal_all();
  ferry_comm_destroy(comms[victim]);
  comms.erase(comms.begin() + static_cast<std::ptrdiff_t>(victim));
  REQUIRE(failures(run_peers(2, [&](size_t who) {
            must(ferry_update_topology(comms[who]), "ferry_update_topology");
          })) == "");
  gather_and_check(comms, 6, [](uint32_t rank) { return size_t{(2u << 20) + rank}; });
  destroy_all(comms);
}

TEST_CASE("all_gather: arguments checked, and a result read before its op succeeded is refused",
          "[all_gather][api]") {
  EmbeddedMaster master;
  auto comms = group_of(master, 2);
  ferry_all_gather_desc desc = gather_desc();
  ferry_gathered* result = nullptr;
  uint8_t byte = 1;
  CHECK(ferry_all_gather(nullptr, &byte, 1, &desc, &result, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_all_gather(comms[0], nullptr, 1, &desc, &result, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("send is NULL"));
  CHECK(ferry_all_gather(comms[0], &byte, 1, nullptr, &result, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_all_gather(comms[0], &byte, 1, &desc, nullptr, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  ferry_all_gather_desc unset{};
  CHECK(ferry_all_gather(comms[0], &byte, 1, &unset, &result, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("struct_size"));
  CHECK(result == nullptr);
  CHECK(ferry_gathered_layout(nullptr, nullptr, nullptr, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  ferry_gathered_destroy(nullptr);

  // Async: the handle is there at once but unreadable until the op succeeded; a result
  // freed before its op is waited does no harm.
  std::vector<ferry_result> before(2), part_past_end(2);
  REQUIRE(failures(run_peers(2, [&](size_t who) {
            std::vector<uint8_t> mine(100'000 * (who + 1), static_cast<uint8_t>(who + 1));
            ferry_gathered* first = nullptr;
            ferry_gathered* second = nullptr;
            ferry_op* op1 = nullptr;
            ferry_op* op2 = nullptr;
            must(ferry_all_gather_async(comms[who], mine.data(), mine.size(), &desc, &first, &op1), "async 1");
            before[who] = ferry_gathered_layout(first, nullptr, nullptr, nullptr);
            must(ferry_all_gather_async(comms[who], mine.data(), mine.size(), &desc, &second, &op2), "async 2");
            ferry_gathered_destroy(second);
            must(ferry_op_wait(op1, nullptr), "wait 1");
            must(ferry_op_wait(op2, nullptr), "wait 2");
            part_past_end[who] = ferry_gathered_part(first, 2, nullptr, nullptr);
            size_t total = 0;
            must(ferry_gathered_layout(first, nullptr, nullptr, &total), "layout");
            if (total != 300'000) throw std::runtime_error("total " + std::to_string(total));
            ferry_gathered_destroy(first);
          })) == "");
  CHECK(before == std::vector<ferry_result>{FERRY_ERR_INVALID_USAGE, FERRY_ERR_INVALID_USAGE});
  CHECK(part_past_end == std::vector<ferry_result>{FERRY_ERR_INVALID_ARGUMENT, FERRY_ERR_INVALID_ARGUMENT});
  destroy_all(comms);
}
