// Wrong arguments and wrong call order through the C API: a clear code and
// message, nothing changed, never a crash.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

using namespace ferry::test;

namespace {

// What a C caller can pass: any int in an enum's slot.
template <class E>
E raw_enum(int value) {
  static_assert(sizeof(E) == sizeof(int));
  E e;
  std::memcpy(&e, &value, sizeof e);
  return e;
}

bool last_error_mentions(const char* word) { return std::string(ferry_last_error()).find(word) != std::string::npos; }

ferry_comm_params default_params(const char* master) {
  ferry_comm_params p;
  ferry_comm_params_init(&p);
  p.master_address = master;
  p.p2p_listen_host = "127.0.0.1";
  return p;
}

}  // namespace

TEST_CASE("api: results have names, and the retryable ones are told apart", "[api]") {
  for (int code = FERRY_OK; code <= FERRY_ERR_INTERNAL; ++code) {
    const char* name = ferry_strerror(static_cast<ferry_result>(code));
    REQUIRE(name != nullptr);
    CHECK(std::strlen(name) > 0);
  }
  CHECK(std::string(ferry_strerror(raw_enum<ferry_result>(999))) == "unknown result code");
  CHECK(ferry_result_is_retryable(FERRY_ERR_PEER_LOST));
  CHECK(ferry_result_is_retryable(FERRY_ERR_TIMEOUT));
  CHECK_FALSE(ferry_result_is_retryable(FERRY_ERR_INVALID_ARGUMENT));
  CHECK_FALSE(ferry_result_is_retryable(FERRY_ERR_INVALID_USAGE));
  CHECK_FALSE(ferry_result_is_retryable(FERRY_ERR_MASTER_LOST));
  CHECK(ferry_version_number() == FERRY_VERSION_NUMBER);
  CHECK(std::string(ferry_version()) == "0.4.0");
  CHECK(ferry_dtype_size(FERRY_BF16) == 2);
  CHECK(ferry_dtype_size(raw_enum<ferry_dtype>(42)) == 0);
}

TEST_CASE("api: NULL pointers and bad values are FERRY_ERR_INVALID_ARGUMENT with a message naming them", "[api]") {
  ferry_master* master = nullptr;
  CHECK(ferry_master_create(nullptr, &master) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_master_create("127.0.0.1:0", nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(last_error_mentions("out"));
  for (const char* bad : {"", "nohost", ":80", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:x1", "::1:80", "[::1"}) {
    INFO(bad);
    CHECK(ferry_master_create(bad, &master) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(master == nullptr);
  }
  CHECK(ferry_master_run(nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_master_stop(nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_master_port(nullptr, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  ferry_master_destroy(nullptr);

  ferry_comm* comm = nullptr;
  CHECK(ferry_comm_create(nullptr, &comm) == FERRY_ERR_INVALID_ARGUMENT);
  ferry_comm_params p = default_params("127.0.0.1:1");
  CHECK(ferry_comm_create(&p, nullptr) == FERRY_ERR_INVALID_ARGUMENT);

  auto rejects = [&](const char* what, void (*change)(ferry_comm_params&)) {
    ferry_comm_params q = default_params("127.0.0.1:1");
    change(q);
    INFO(what);
    CHECK(ferry_comm_create(&q, &comm) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(comm == nullptr);
    CHECK(std::strlen(ferry_last_error()) > 0);
  };
  rejects("uninitialised struct", [](ferry_comm_params& q) { q.struct_size = 0; });
  rejects("no master", [](ferry_comm_params& q) { q.master_address = nullptr; });
  rejects("master port 0", [](ferry_comm_params& q) { q.master_address = "127.0.0.1:0"; });
  rejects("65 connections", [](ferry_comm_params& q) { q.p2p_connections = 65; });
  rejects("inverted port range", [](ferry_comm_params& q) {
    q.p2p_port_min = 5000;
    q.p2p_port_max = 4000;
  });
  rejects("zero io threads", [](ferry_comm_params& q) { q.io_threads = 0; });
  rejects("tiny chunks", [](ferry_comm_params& q) { q.max_chunk_bytes = 16; });
  rejects("zero timeout", [](ferry_comm_params& q) { q.timeout_ms = 0; });
  rejects("tiny heartbeat", [](ferry_comm_params& q) { q.heartbeat_timeout_ms = 1; });
  rejects("no listen host", [](ferry_comm_params& q) { q.p2p_listen_host = nullptr; });

  CHECK(ferry_connect(nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_update_topology(nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  uint32_t pending;
  CHECK(ferry_peers_pending(nullptr, &pending) == FERRY_ERR_INVALID_ARGUMENT);
  int64_t value;
  CHECK(ferry_comm_get_attribute(nullptr, FERRY_ATTR_RANK, &value) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_allreduce(nullptr, nullptr, nullptr, 0, nullptr, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  ferry_comm_destroy(nullptr);
}

TEST_CASE("api: a port conflict, or no master answering within master_connect_timeout_ms, is FERRY_ERR_CONNECT",
          "[api]") {
  EmbeddedMaster first;
  ferry_master* second = nullptr;
  std::string taken = first.address();
  CHECK(ferry_master_create(taken.c_str(), &second) == FERRY_ERR_CONNECT);
  CHECK(second == nullptr);

  ferry_comm_params p = default_params(taken.c_str());
  p.timeout_ms = 2000;
  p.master_connect_timeout_ms = 400;
  first.stop();  // nobody accepts there any more
  ferry_comm* comm = nullptr;
  REQUIRE(ferry_comm_create(&p, &comm) == FERRY_OK);
  const auto started = std::chrono::steady_clock::now();
  CHECK(ferry_connect(comm) == FERRY_ERR_CONNECT);
  // Dialed again meanwhile (refused at once each time), then given up at the deadline.
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(300));
  CHECK(last_error_mentions(taken.c_str()));
  CHECK(last_error_mentions("no master answered within 400 ms"));
  ferry_comm_destroy(comm);
  p.master_connect_timeout_ms = 0;  // one dial: refused at once
  REQUIRE(ferry_comm_create(&p, &comm) == FERRY_OK);
  CHECK(ferry_connect(comm) == FERRY_ERR_CONNECT);
  CHECK_FALSE(last_error_mentions("no master answered"));
  ferry_comm_destroy(comm);
}

TEST_CASE("api: calls out of order are FERRY_ERR_INVALID_USAGE", "[api]") {
  EmbeddedMaster master;
  std::string address = master.address();
  ferry_comm_params p = default_params(address.c_str());
  ferry_comm* comm = nullptr;
  REQUIRE(ferry_comm_create(&p, &comm) == FERRY_OK);

  std::vector<float> data(8, 1.0f);
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  uint32_t pending = 0;
  int64_t value = 0;
  CHECK(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr) == FERRY_ERR_INVALID_USAGE);
  CHECK(last_error_mentions("ferry_connect"));
  CHECK(ferry_update_topology(comm) == FERRY_ERR_INVALID_USAGE);
  CHECK(ferry_peers_pending(comm, &pending) == FERRY_ERR_INVALID_USAGE);
  CHECK(ferry_comm_get_attribute(comm, FERRY_ATTR_RANK, &value) == FERRY_ERR_INVALID_USAGE);

  REQUIRE(ferry_connect(comm) == FERRY_OK);
  CHECK(ferry_connect(comm) == FERRY_ERR_INVALID_USAGE);
  CHECK(ferry_comm_get_attribute(comm, raw_enum<ferry_attribute>(77), &value) == FERRY_ERR_INVALID_ARGUMENT);

  SECTION("bad all-reduce arguments change nothing") {
    std::vector<float> before = data;
    ferry_allreduce_desc bad = desc;
    bad.dtype = raw_enum<ferry_dtype>(12);
    CHECK(ferry_allreduce(comm, data.data(), data.data(), data.size(), &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    bad = desc;
    bad.op = raw_enum<ferry_reduce_op>(-1);
    CHECK(ferry_allreduce(comm, data.data(), data.data(), data.size(), &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    bad = desc;
    bad.struct_size = 0;
    CHECK(ferry_allreduce(comm, data.data(), data.data(), data.size(), &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(ferry_allreduce(comm, nullptr, data.data(), data.size(), &desc, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(ferry_allreduce(comm, data.data(), nullptr, data.size(), &desc, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(ferry_allreduce(comm, data.data(), data.data(), data.size(), nullptr, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(ferry_allreduce(comm, data.data(), data.data() + 1, 4, &desc, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(last_error_mentions("overlap"));
    CHECK(ferry_allreduce(comm, data.data(), data.data(), SIZE_MAX / 2, &desc, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    ferry_op_info info{};
    CHECK(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, &info) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(data == before);
    // And the communicator still works.
    CHECK(ferry_allreduce(comm, nullptr, nullptr, 0, &desc, nullptr) == FERRY_OK);
    CHECK(std::string(ferry_last_error()).empty());
  }
  ferry_comm_destroy(comm);
}

TEST_CASE("api: a struct from an older caller keeps the defaults of fields it lacks", "[api]") {
  EmbeddedMaster master;
  std::string address = master.address();
  ferry_comm_params p = default_params(address.c_str());
  // An "old" caller whose struct ends after p2p_listen_host.
  p.struct_size = static_cast<uint32_t>(offsetof(ferry_comm_params, p2p_port_min));
  p.io_threads = 0;  // beyond its struct: must be ignored, not rejected
  ferry_comm* comm = nullptr;
  REQUIRE(ferry_comm_create(&p, &comm) == FERRY_OK);
  CHECK(ferry_connect(comm) == FERRY_OK);
  ferry_comm_destroy(comm);
}

TEST_CASE("api: an op info from an older caller is written only as far as it reaches", "[api]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  grow_group(comm, 1);
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  std::vector<float> data(64, 1.0f);
  ferry_op_info info{};
  info.struct_size = static_cast<uint32_t>(offsetof(ferry_op_info, start_s));  // before the phases existed
  info.start_s = info.longest_stall_s = info.commit_s = -7;
  REQUIRE(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, &info) == FERRY_OK);
  CHECK(info.world_size == 1);
  CHECK(info.start_s == -7);
  CHECK(info.commit_s == -7);
  info.struct_size = sizeof info;
  REQUIRE(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, &info) == FERRY_OK);
  CHECK(info.start_s >= 0);
  CHECK(info.commit_s >= 0);
  CHECK(info.start_s + info.longest_stall_s + info.commit_s <= info.duration_s);
  ferry_comm_destroy(comm);
}

TEST_CASE("api: the master rejects a second run and can be stopped twice", "[api]") {
  ferry_master* master = nullptr;
  REQUIRE(ferry_master_create("127.0.0.1:0", &master) == FERRY_OK);
  CHECK(ferry_master_run(master) == FERRY_OK);
  CHECK(ferry_master_run(master) == FERRY_ERR_INVALID_USAGE);
  CHECK(ferry_master_stop(master) == FERRY_OK);
  CHECK(ferry_master_stop(master) == FERRY_OK);
  CHECK(ferry_master_run(master) == FERRY_ERR_INVALID_USAGE);
  ferry_master_destroy(master);
}

TEST_CASE("api: destroy functions leave the thread's last error alone", "[api]") {
  EmbeddedMaster master;
  std::string address = master.address();
  ferry_comm_params p = default_params(address.c_str());
  ferry_comm* comm = nullptr;
  REQUIRE(ferry_comm_create(&p, &comm) == FERRY_OK);
  REQUIRE(ferry_update_topology(comm) == FERRY_ERR_INVALID_USAGE);
  std::string message = ferry_last_error();
  REQUIRE_FALSE(message.empty());
  ferry_comm_destroy(comm);
  ferry_master_destroy(nullptr);
  ferry_comm_destroy(nullptr);
  CHECK(ferry_last_error() == message);
}
