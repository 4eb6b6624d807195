// TLS through the C API: who gets in and who does not, and how fast a wrong
// setup is told so. (That collectives and shared state give the same results
// over TLS is shown by the [tls] cases of the all-reduce and shared-state
// tests, which run over both wires.)
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "harness.h"

using namespace ferry::test;
using Clock = std::chrono::steady_clock;

namespace {

struct Attempt {
  ferry_result create = FERRY_OK;
  ferry_result connect = FERRY_OK;
  std::string error;
  double seconds = 0;  // how long ferry_connect took
};

// Creates a peer with these TLS files (NULL: unset) and tries to join; the peer is destroyed after.
Attempt try_join(const std::string& master, const char* cert, const char* key, const char* ca) {
  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = master.c_str();
  params.p2p_listen_host = "127.0.0.1";
  params.timeout_ms = 30000;
  params.tls_cert_file = cert;
  params.tls_key_file = key;
  params.tls_ca_file = ca;
  Attempt a;
  ferry_comm* comm = nullptr;
  a.create = ferry_comm_create(&params, &comm);
  if (a.create != FERRY_OK) {
    a.error = ferry_last_error();
    return a;
  }
  auto started = Clock::now();
  a.connect = ferry_connect(comm);
  a.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (a.connect != FERRY_OK) a.error = ferry_last_error();
  ferry_comm_destroy(comm);
  return a;
}

const char* file(const char* name) { return cert_path(name).c_str(); }

// Two peers join and all-reduce: the master still serves good peers.
void two_peers_sum(const std::string& master) {
  auto results = run_peers(2, [&](size_t) {
    ferry_comm* comm = create_peer(master);
    grow_group(comm, 2);
    std::vector<float> data(100000, 1.5f);
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
    ferry_comm_destroy(comm);
    if (data.front() != 3.0f || data.back() != 3.0f) throw std::runtime_error("wrong sum");
  });
  REQUIRE(failures(results) == "");
}

}  // namespace

TEST_CASE("tls: a peer whose certificate another CA signed is refused with FERRY_ERR_AUTH", "[tls][auth]") {
  WireScope scope(Wire::tls);
  EmbeddedMaster master;
  SECTION("the master refuses the stranger's certificate") {
    // It trusts both CAs, so only the master's check can stop it.
    Attempt a = try_join(master.address(), file("rogue.pem"), file("rogue.key"), file("both-ca.pem"));
    CHECK(a.create == FERRY_OK);
    CHECK(a.connect == FERRY_ERR_AUTH);
    INFO(a.error);
    CHECK(a.seconds < 10);
  }
  SECTION("the peer refuses a master its CA did not sign") {
    // Its own certificate is good, but it trusts only the rogue CA: its
    // certificate does not verify against that CA, which create reports.
    Attempt a = try_join(master.address(), file("peer.pem"), file("peer.key"), file("rogue-ca.pem"));
    CHECK(a.create == FERRY_ERR_INVALID_ARGUMENT);
    CHECK_THAT(a.error, Catch::Contains("does not verify against"));
  }
  two_peers_sum(master.address());
}

TEST_CASE("tls: missing or partial TLS settings are refused at create with FERRY_ERR_INVALID_ARGUMENT",
          "[tls][api]") {
  EmbeddedMaster master;  // plain; create fails before any connection
  Attempt no_ca = try_join(master.address(), file("peer.pem"), file("peer.key"), nullptr);
  CHECK(no_ca.create == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(no_ca.error, Catch::Contains("tls_ca_file"));
  Attempt no_key = try_join(master.address(), file("peer.pem"), nullptr, file("ca.pem"));
  CHECK(no_key.create == FERRY_ERR_INVALID_ARGUMENT);
  Attempt missing = try_join(master.address(), "/nonexistent/peer.pem", file("peer.key"), file("ca.pem"));
  CHECK(missing.create == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(missing.error, Catch::Contains("/nonexistent/peer.pem"));
  Attempt mismatched = try_join(master.address(), file("peer.pem"), file("master.key"), file("ca.pem"));
  CHECK(mismatched.create == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(mismatched.error, Catch::Contains("does not match"));

  ferry_master_params params;
  ferry_master_params_init(&params);
  params.listen_address = "127.0.0.1:0";
  ferry_master* m = nullptr;
  params.tls_key_file = file("master.key");  // a key without its certificate
  CHECK(ferry_master_create_with(&params, &m) == FERRY_ERR_INVALID_ARGUMENT);
  params.tls_cert_file = file("master.pem");
  params.tls_ca_file = "/nonexistent/ca.pem";
  CHECK(ferry_master_create_with(&params, &m) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("/nonexistent/ca.pem"));
  CHECK(m == nullptr);
}

TEST_CASE("tls: plain and TLS sides of a run fail ferry_connect with FERRY_ERR_CONNECT within a deadline",
          "[tls][mismatch]") {
  SECTION("a TLS peer meeting a plain master fails at once") {
    EmbeddedMaster master;
    Attempt a = try_join(master.address(), file("peer.pem"), file("peer.key"), file("ca.pem"));
    CHECK(a.connect == FERRY_ERR_CONNECT);
    INFO(a.error);
    CHECK_THAT(a.error, Catch::Contains("TLS"));
    CHECK(a.seconds < 5);
    two_peers_sum(master.address());
  }
  SECTION("a plain peer meeting a TLS master fails by the master's handshake deadline") {
    WireScope scope(Wire::tls);
    EmbeddedMaster master;
    Attempt a = try_join(master.address(), nullptr, nullptr, nullptr);
    CHECK(a.connect == FERRY_ERR_CONNECT);
    INFO(a.error);
    CHECK_THAT(a.error, Catch::Contains("TLS"));
    CHECK(a.seconds < 20);  // the master's handshake deadline is 10 s; the peer's own wait would be 30 s
    two_peers_sum(master.address());
  }
}

TEST_CASE("tls: a master without a CA asks for no certificate, peers still verify it and each other",
          "[tls]") {
  ferry_master_params params;
  ferry_master_params_init(&params);
  params.listen_address = "127.0.0.1:0";
  params.tls_cert_file = file("master.pem");
  params.tls_key_file = file("master.key");
  ferry_master* m = nullptr;
  must(ferry_master_create_with(&params, &m), "ferry_master_create_with");
  uint16_t port = 0;
  must(ferry_master_port(m, &port), "ferry_master_port");
  must(ferry_master_run(m), "ferry_master_run");
  const std::string address = "127.0.0.1:" + std::to_string(port);
  {
    WireScope scope(Wire::tls);
    two_peers_sum(address);
  }
  // A peer that trusts only the rogue CA refuses this master.
  Attempt a = try_join(address, file("rogue.pem"), file("rogue.key"), file("rogue-ca.pem"));
  CHECK(a.connect == FERRY_ERR_AUTH);
  INFO(a.error);
  ferry_master_destroy(m);
}
