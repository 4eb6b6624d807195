// Shared-state sync through the C API: newcomers receive the state, the
// majority wins, the strategies and the revision rule hold, tensors that may
// differ are left alone, peer groups never mix.
#include <catch2/catch.hpp>

#include <cstring>
#include <latch>
#include <map>
#include <set>
#include <thread>

#include "core/content_hash.h"
#include "harness.h"
#include "shared_state_calls.h"
#include "one_tensor_state.h"  // tools/common
#include "sanitized_build.h"

using namespace ferry::test;

namespace {

// A member waits (up to ~10 s) until a newcomer is pending, then votes it in.
void admit_newcomer(ferry_comm* comm) {
  uint32_t pending = 0;
  for (int i = 0; i < 2000 && pending == 0; ++i) {
    must(ferry_peers_pending(comm, &pending), "ferry_peers_pending");
    if (pending == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  must(ferry_update_topology(comm), "ferry_update_topology");
}

}  // namespace

TEST_CASE("shared state: a newcomer receives the exact bytes of 256 MiB of tensors", "[shared_state][tls]") {
  const Wire wire = GENERATE(Wire::plain, Wire::tls);
  CAPTURE(wire_name(wire));
  WireScope scope(wire);
  EmbeddedMaster master;
  std::vector<State> states(3);
  std::vector<SyncResult> results(3);
  std::latch newcomer_may_join(1);
  auto outcome = run_peers(3, [&](size_t who) {
    PeerSettings settings;
    settings.connections = 4;
    settings.io_threads = 2;
    ferry_comm* comm = create_peer(master.address(), settings);
    State& st = states[who];
    if (who < 2) {
      st.fill("model.weight", 48u << 20, 1.0f);  // 192 MiB
      st.fill("model.bias", 1000, 2.0f);
      st.fill("optimizer.momentum", 16u << 20, 3.0f);  // 64 MiB
      st.revision = 7;
      grow_group(comm, 2);
      if (who == 0) newcomer_may_join.count_down();
      admit_newcomer(comm);
    } else {
      newcomer_may_join.wait();
      st.tensors["model.weight"].assign(48u << 20, 0.0f);  // right shapes, stale bytes
      st.tensors["model.bias"].assign(1000, 0.0f);
      st.tensors["optimizer.momentum"].assign(16u << 20, 0.0f);
      must(ferry_connect(comm), "ferry_connect");
    }
    results[who] = must_sync(comm, st, who < 2 ? FERRY_SYNC_ENFORCE_POPULAR : FERRY_SYNC_RECEIVE_ONLY);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (const auto& name : {"model.weight", "model.bias", "optimizer.momentum"}) {
    INFO(name);
    CHECK(states[2].hash(name) == states[0].hash(name));
    CHECK(states[2].tensors[name] == states[0].tensors[name]);
    CHECK(results[2].changed[name] == 1);
    CHECK(results[0].changed[name] == 0);
  }
  CHECK(states[2].revision == 7);
  CHECK(results[2].info.tensors_changed == 3);
  CHECK(results[2].info.bytes_received >= 256u << 20);
  CHECK(results[2].info.bytes_sent == 0);  // receive-only never sends
  CHECK(results[0].info.bytes_sent + results[1].info.bytes_sent >= 256u << 20);
}

TEST_CASE("shared state: the majority wins a 3-vs-1 conflict, differing-allowed tensors are left alone",
          "[shared_state]") {
  EmbeddedMaster master;
  std::vector<State> states(4);
  std::vector<SyncResult> results(4);
  auto outcome = run_peers(4, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 4);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    State& st = states[rank];
    st.fill("w", 100000, rank == 2 ? 99.0f : 5.0f);  // rank 2 is the odd one out
    st.fill("rng", 64, static_cast<float>(rank));     // legitimately different everywhere
    st.may_differ.insert("rng");
    st.revision = 1;
    results[rank] = must_sync(comm, st, FERRY_SYNC_ENFORCE_POPULAR);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (size_t r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(states[r].tensors["w"] == states[0].tensors["w"]);
    CHECK(states[r].tensors["w"][0] == 5.0f);
    CHECK(states[r].tensors["rng"][0] == static_cast<float>(r));
    CHECK(results[r].changed["w"] == (r == 2 ? 1 : 0));
    CHECK(results[r].changed["rng"] == 0);
  }
}

TEST_CASE("shared state: a newcomer behind in revision ends with the popular bytes, even enforcing",
          "[shared_state]") {
  EmbeddedMaster master;
  std::vector<State> states(3);
  auto outcome = run_peers(3, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    State& st = states[rank];
    st.revision = rank == 0 ? 3 : 10;            // rank 0 is behind...
    st.fill("w", 5000, rank == 0 ? -1.0f : 1.0f);  // ...and alone with its bytes
    must_sync(comm, st, FERRY_SYNC_ENFORCE_POPULAR);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (auto& s : states) {
    CHECK(s.tensors["w"][0] == 1.0f);
    CHECK(s.revision == 10);
  }
}

TEST_CASE("shared state: the revision must grow by one per sync", "[shared_state]") {
  EmbeddedMaster master;
  std::vector<std::vector<ferry_result>> got(2);
  std::vector<std::string> why(2);
  auto outcome = run_peers(2, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    State st;
    st.fill("w", 10, 1.0f);
    st.revision = 5;
    got[rank].push_back(sync(comm, st, FERRY_SYNC_ENFORCE_POPULAR).result);  // first sync: any revision
    st.revision = 7;                                                         // skips 6
    auto bad = sync(comm, st, FERRY_SYNC_ENFORCE_POPULAR);
    got[rank].push_back(bad.result);
    why[rank] = bad.error;
    st.revision = 6;
    got[rank].push_back(sync(comm, st, FERRY_SYNC_ENFORCE_POPULAR).result);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (size_t r = 0; r < 2; ++r) {
    CHECK(got[r] == std::vector<ferry_result>{FERRY_OK, FERRY_ERR_INVALID_USAGE, FERRY_OK});
    CHECK(why[r].find("grow by exactly one") != std::string::npos);
  }
}

TEST_CASE("shared state: conflicting send-only peers are kicked, the others carry on", "[shared_state]") {
  EmbeddedMaster master;
  std::vector<ferry_result> first(3), second(3, FERRY_OK);
  std::vector<float> value(3, 0);
  auto outcome = run_peers(3, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    State st;
    st.fill("w", 1000, rank == 2 ? 2.0f : 1.0f);
    st.revision = 1;
    // Ranks 0 and 2 both insist on their own bytes.
    first[rank] = sync(comm, st, rank == 1 ? FERRY_SYNC_RECEIVE_ONLY : FERRY_SYNC_SEND_ONLY).result;
    if (first[rank] == FERRY_ERR_KICKED) {
      ferry_comm_destroy(comm);
      return;
    }
    must(ferry_update_topology(comm), "ferry_update_topology");
    st.revision = 2;
    second[rank] = sync(comm, st, rank == 1 ? FERRY_SYNC_RECEIVE_ONLY : FERRY_SYNC_SEND_ONLY).result;
    value[rank] = st.tensors["w"][0];
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  // The lowest peer id keeps its bytes; the other send-only peer is kicked.
  int kicked = 0;
  for (size_t r = 0; r < 3; ++r) kicked += first[r] == FERRY_ERR_KICKED;
  CHECK(kicked == 1);
  for (size_t r = 0; r < 3; ++r)
    if (first[r] != FERRY_ERR_KICKED) {
      CHECK(first[r] == FERRY_ERR_PEER_LOST);
      CHECK(second[r] == FERRY_OK);
    }
  CHECK(value[1] == (first[0] == FERRY_ERR_KICKED ? value[2] : value[0]));
}

TEST_CASE("shared state: two peer groups sync different content and never mix", "[shared_state][groups]") {
  EmbeddedMaster master;
  std::vector<State> states(4);
  auto outcome = run_peers(4, [&](size_t who) {
    PeerSettings settings;
    settings.group = who < 2 ? 1 : 2;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, 2);
    State& st = states[who];
    st.fill("w", 300000, who < 2 ? 10.0f : 20.0f);
    if (who == 1 || who == 3) st.fill("w", 300000, 0.0f);  // one stale peer per group
    st.revision = who == 1 || who == 3 ? 0 : 4;
    must_sync(comm, st, who == 1 || who == 3 ? FERRY_SYNC_RECEIVE_ONLY : FERRY_SYNC_ENFORCE_POPULAR);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  CHECK(states[1].tensors["w"] == states[0].tensors["w"]);
  CHECK(states[3].tensors["w"] == states[2].tensors["w"]);
  CHECK(states[1].tensors["w"][0] == 10.0f);
  CHECK(states[3].tensors["w"][0] == 20.0f);
}

TEST_CASE("shared state: zstd moves fewer bytes for compressible tensors, same result", "[shared_state]") {
  EmbeddedMaster master;
  std::vector<State> states(2);
  std::vector<SyncResult> results(2);
  auto outcome = run_peers(2, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    State& st = states[rank];
    st.fill("w", 4u << 20, rank == 0 ? 1.0f : 0.0f);  // 16 MiB with a short period: compresses well
    st.revision = rank == 0 ? 1 : 0;
    results[rank] = must_sync(comm, st, rank == 0 ? FERRY_SYNC_SEND_ONLY : FERRY_SYNC_RECEIVE_ONLY, 3);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  CHECK(states[1].tensors["w"] == states[0].tensors["w"]);
  CHECK(results[1].info.bytes_received < (16u << 20) / 4);
}

TEST_CASE("shared state: bad tensors and mismatched layouts are clear errors", "[shared_state][api]") {
  EmbeddedMaster master;
  std::vector<SyncResult> got(2);
  auto outcome = run_peers(2, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    State st;
    st.fill("w", rank == 0 ? 10 : 11, 1.0f);
    got[rank] = sync(comm, st, FERRY_SYNC_ENFORCE_POPULAR);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (auto& g : got) {
    CHECK(g.result == FERRY_ERR_MISMATCH);
    CHECK(g.error.find("'w'") != std::string::npos);
  }

  ferry_comm* comm = create_peer(master.address());
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  std::vector<float> a(4), b(4);
  ferry_tensor t[2];
  ferry_tensor_init(&t[0]);
  ferry_tensor_init(&t[1]);
  t[0].name = t[1].name = "same";
  t[0].data = a.data();
  t[1].data = b.data();
  t[0].count = t[1].count = 4;
  ferry_shared_state s;
  ferry_shared_state_init(&s);
  s.tensors = t;
  s.count = 2;
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  t[1].name = "other";
  t[1].device = FERRY_DEVICE_CUDA;
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  t[1].device = FERRY_DEVICE_CPU;
  const int bad_dtype = 99;  // what a C caller can put in the enum's slot
  std::memcpy(&t[1].dtype, &bad_dtype, sizeof bad_dtype);
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("state->tensors[1].dtype 99 is not a ferry_dtype"));
  t[1].dtype = FERRY_F32;
  t[1].data = nullptr;
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  t[1].data = b.data();
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_RECEIVE_ONLY, nullptr) == FERRY_ERR_INVALID_USAGE);
  CHECK(ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, nullptr) == FERRY_OK);  // a world of one
  ferry_comm_destroy(comm);
}

namespace {

// Tensors of any dtype, as raw elements of `width` bytes.
struct TypedTensor {
  std::string name;
  ferry_dtype dtype;
  size_t width;
  std::vector<uint8_t> bytes;
};

SyncResult sync_typed(ferry_comm* comm, std::vector<TypedTensor>& state, uint64_t& revision) {
  std::vector<ferry_tensor> tensors;
  for (auto& typed : state) {
    ferry_tensor t;
    ferry_tensor_init(&t);
    t.name = typed.name.c_str();
    t.data = typed.bytes.data();
    t.count = typed.bytes.size() / typed.width;
    t.dtype = typed.dtype;
    tensors.push_back(t);
  }
  ferry_shared_state s;
  ferry_shared_state_init(&s);
  s.revision = revision;
  s.tensors = tensors.data();
  s.count = tensors.size();
  SyncResult out;
  out.info.struct_size = sizeof out.info;
  out.result = ferry_sync_shared_state(comm, &s, FERRY_SYNC_ENFORCE_POPULAR, &out.info);
  if (out.result != FERRY_OK) throw std::runtime_error(std::string("ferry_sync_shared_state: ") + ferry_last_error());
  revision = s.revision;
  for (auto& t : tensors) out.changed[t.name] = t.changed;
  return out;
}

// f16 bit patterns a float round trip would not keep (NaN payloads, -0, subnormals), and i16 extremes.
std::vector<TypedTensor> half_and_short_state(bool stale) {
  std::vector<TypedTensor> state{{"f16.weight", FERRY_F16, 2, {}}, {"i16.counts", FERRY_I16, 2, {}}};
  const uint16_t f16_patterns[] = {0x7e01, 0xfc01, 0x8000, 0x0001, 0x3c00, 0x7bff};
  const int16_t i16_values[] = {-32768, 32767, -1, 0, 12345};
  for (size_t i = 0; i < 300'001; ++i) {  // an odd count: not a whole number of 4-byte words
    uint16_t h = stale ? 0 : static_cast<uint16_t>(f16_patterns[i % 6] ^ (i & 0x3ff));
    auto s = static_cast<uint16_t>(stale ? 0 : i16_values[i % 5] + static_cast<int16_t>(i % 7));
    for (int b = 0; b < 2; ++b) {
      state[0].bytes.push_back(static_cast<uint8_t>(h >> (8 * b)));
      state[1].bytes.push_back(static_cast<uint8_t>(s >> (8 * b)));
    }
  }
  return state;
}

}  // namespace

TEST_CASE("shared state: f16 and i16 tensors arrive bit for bit, and later syncs of unchanged state move no bytes",
          "[shared_state]") {
  EmbeddedMaster master;
  std::vector<std::vector<TypedTensor>> states(3);
  std::vector<std::vector<SyncResult>> results(3);
  std::latch newcomer_may_join(1);
  auto outcome = run_peers(3, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address());
    uint64_t revision = 0;
    states[who] = half_and_short_state(who == 2);
    if (who < 2) {
      revision = 5;
      grow_group(comm, 2);
      if (who == 0) newcomer_may_join.count_down();
      admit_newcomer(comm);
    } else {
      newcomer_may_join.wait();
      must(ferry_connect(comm), "ferry_connect");
    }
    for (int round = 0; round < 3; ++round) {
      if (round > 0) ++revision;  // every sync after the first moves the revision on by one
      results[who].push_back(sync_typed(comm, states[who], revision));
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  for (size_t t = 0; t < 2; ++t) {
    INFO(states[0][t].name);
    CHECK(states[2][t].bytes == states[0][t].bytes);
    CHECK(states[1][t].bytes == states[0][t].bytes);
    CHECK(results[2][0].changed[states[0][t].name] == 1);
  }
  CHECK(results[2][0].info.bytes_received >= 2 * 2 * 300'001);
  for (size_t who = 0; who < 3; ++who)
    for (size_t round = 1; round < 3; ++round) {
      INFO("peer " << who << ", sync " << round);
      CHECK(results[who][round].info.bytes_received == 0);
      CHECK(results[who][round].info.bytes_sent == 0);
      CHECK(results[who][round].info.tensors_changed == 0);
      CHECK(results[who][round].info.revision == 5 + round);
    }
}

TEST_CASE("shared state: one tensor larger than 4 GiB arrives exactly", "[shared_state][large]") {
  // 8 GiB in one process (both peers' copies), and the sanitizers' shadow of it: plain builds only.
  if (kReservesAddressSpace) return report_skipped("two 4 GiB tensors in one process under a sanitizer");
  constexpr size_t kBytes = (size_t{4} << 30) + 12'345;  // past 2^32, and not a whole chunk
  EmbeddedMaster master;
  std::vector<std::vector<uint8_t>> tensors(2);
  std::vector<SyncResult> results(2);
  std::latch newcomer_may_join(1);
  auto outcome = run_peers(2, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address());
    auto& bytes = tensors[who];
    bytes.assign(kBytes, 0);
    if (who == 0) {
      // Every 4 KiB page differs (its index in its first bytes), so a chunk at a wrapped offset is caught.
      for (size_t page = 0; page * 4096 < kBytes; ++page) std::memcpy(&bytes[page * 4096], &page, sizeof page);
      bytes.back() = 0xa5;
      grow_group(comm, 1);
      newcomer_may_join.count_down();
      admit_newcomer(comm);
    } else {
      newcomer_may_join.wait();
      must(ferry_connect(comm), "ferry_connect");
    }
    uint64_t revision = who == 0 ? 1 : 0;
    int changed = 0;
    results[who].info.struct_size = sizeof results[who].info;
    must(ferry::tooling::sync_one_tensor(comm, "embedding", bytes.data(), bytes.size(), FERRY_U8, revision,
                                         who == 0 ? FERRY_SYNC_SEND_ONLY : FERRY_SYNC_RECEIVE_ONLY, &results[who].info,
                                         &changed),
         "ferry_sync_shared_state");
    results[who].changed["embedding"] = changed;
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  CHECK(results[1].changed["embedding"] == 1);
  CHECK(results[1].info.bytes_received >= kBytes);
  CHECK(tensors[1].back() == 0xa5);
  CHECK(std::memcmp(tensors[0].data(), tensors[1].data(), kBytes) == 0);
}
