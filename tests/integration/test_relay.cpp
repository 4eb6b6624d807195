// Relayed ring links (issue 37, section 3): where two neighbours can neither dial nor
// punch through to each other, a third member relays their link (peer/relay_service.h),
// the two running TLS end to end through it. With punching off (loopback lets every
// punch through), two open peers and three that accept nothing make a ring with one
// relayed hop. Its relay then leaves in the middle of a collective: the survivors fail
// it, re-form (the one open peer left relays both closed pairs) and redo it, and every
// result is the exact sum on every peer.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "core/hash.h"
#include "harness.h"

using namespace ferry::test;

namespace {

float input(size_t peer, size_t round, size_t k) {
  return static_cast<float>((k * 7 + peer * 13 + round * 5) % 101) * 0.25f;
}

// Every peer reports a value, and waits for everyone's.
struct Exchange {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> values;
  size_t arrived = 0;
  explicit Exchange(size_t n) : values(n, 0) {}
  std::vector<int64_t> swap(size_t i, int64_t value) {
    std::unique_lock lock(mu);
    values[i] = value;
    ++arrived;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return arrived == values.size(); });
    return values;
  }
};

}  // namespace

TEST_CASE("relay: an open peer relays two closed neighbours' link end to end, and its loss mid-collective re-forms "
          "the ring with exact results",
          "[relay][dial_out_only][tls]") {
  const Wire wire = GENERATE(Wire::plain, Wire::tls);
  WireScope scope(wire);
  INFO(wire_name(wire));
  EmbeddedMaster master(0, "127.0.0.1", 0, /*punch=*/false);
  const size_t peers = 5;  // 0 and 1 open, 2 3 4 accept nothing
  const size_t count = 600'000;
  Exchange relays(peers), ids(peers);
  std::vector<std::string> problems(peers);
  std::vector<uint64_t> hashes(peers, 0);
  auto results = run_peers(peers, [&](size_t i) {
    PeerSettings settings;
    settings.dial_out_only = i >= 2;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    std::vector<float> data(count);
    for (size_t k = 0; k < count; ++k) data[k] = input(i, 0, k);
    ferry_allreduce_desc desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM);
    must(ferry_allreduce(comm, data.data(), data.data(), count, &desc, nullptr), "ferry_allreduce");
    for (size_t k = 0; k < count; ++k) {
      float want = 0;
      for (size_t r = 0; r < peers; ++r) want += input(r, 0, k);
      if (data[k] != want) {
        problems[i] += "round 0: element " + std::to_string(k) + "\n";
        break;
      }
    }
    const auto relay_of = relays.swap(i, attribute(comm, FERRY_ATTR_NEXT_LINK_RELAY));
    const auto id_of = ids.swap(i, attribute(comm, FERRY_ATTR_PEER_ID));
    std::set<int64_t> relayers;
    size_t relayed = 0;
    for (int64_t r : relay_of)
      if (r != 0) {
        ++relayed;
        relayers.insert(r);
      }
    if (relayed != 1) problems[i] += std::to_string(relayed) + " relayed hops, expected 1\n";
    if (relayers.size() != 1) return;
    const int64_t relay = *relayers.begin();
    if (relay != id_of[0] && relay != id_of[1]) problems[i] += "the relay is not an open peer\n";
    if (id_of[i] == relay) {
      if (attribute(comm, FERRY_ATTR_RELAYED_BYTES) < static_cast<int64_t>(count * sizeof(float)))
        problems[i] += "the relay forwarded less than one pass of the tensor\n";
      // Gone while the others' next all-reduce waits for it.
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ferry_comm_destroy(comm);
      return;
    }
    for (size_t k = 0; k < count; ++k) data[k] = input(i, 1, k);
    std::vector<float> out(count);
    desc.tag = 1;
    ferry_result r = ferry_allreduce(comm, data.data(), out.data(), count, &desc, nullptr);
    if (r == FERRY_OK) problems[i] += "an all-reduce without the relay, which had not left, succeeded\n";
    // Re-form without it, and redo the all-reduce.
    for (int attempt = 0; attempt < 20 && r != FERRY_OK; ++attempt) {
      must(ferry_update_topology(comm), "ferry_update_topology");
      if (attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) != static_cast<int64_t>(peers - 1)) continue;
      r = ferry_allreduce(comm, data.data(), out.data(), count, &desc, nullptr);
    }
    if (r != FERRY_OK) {
      problems[i] += std::string("no all-reduce after the relay left: ") + ferry_last_error() + "\n";
    } else {
      for (size_t k = 0; k < count; ++k) {
        float want = 0;
        for (size_t p = 0; p < peers; ++p)
          if (id_of[p] != relay) want += input(p, 1, k);
        if (out[k] != want) {
          problems[i] += "round 1: element " + std::to_string(k) + "\n";
          break;
        }
      }
      hashes[i] = ferry::hash_bytes(out.data(), count * sizeof(float));
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t i = 0; i < peers; ++i) CHECK(problems[i] == "");
  std::set<uint64_t> distinct(hashes.begin(), hashes.end());
  distinct.erase(0);  // the relay's
  CHECK(distinct.size() == 1);
}
