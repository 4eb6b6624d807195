// IPv6 through the C API: a master at [::1], peers that listen with the
// defaults (dual-stack "::"), and the address each peer is advertised at.
// Loopback only: ::1 and 127.0.0.1 are the two families this machine has.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "harness.h"

using namespace ferry::test;

namespace {

// Values whose sum depends on the order of additions: equal bits everywhere or a failure.
std::vector<double> order_sensitive(size_t n, size_t rank) {
  std::vector<double> data(n);
  for (size_t k = 0; k < data.size(); ++k) data[k] = 1.0 / static_cast<double>(k + 1 + 7 * rank) + 1e-17 * static_cast<double>(rank);
  return data;
}

bool has_ipv6_loopback() {
  ferry_master_params params;
  ferry_master_params_init(&params);
  params.listen_address = "[::1]:0";
  ferry_master* master = nullptr;
  if (ferry_master_create_with(&params, &master) != FERRY_OK) return false;
  ferry_master_destroy(master);
  return true;
}

// The peers' all-reduce results and rings; runs `peers` peers against `master`, peer i with settings[i].
struct Outcome {
  std::vector<std::string> failures;
  std::vector<std::vector<double>> results;
  std::vector<std::vector<uint64_t>> rings;
};

Outcome run_group(const std::string& master, const std::vector<PeerSettings>& settings) {
  const size_t peers = settings.size();
  Outcome out;
  out.results.resize(peers);
  out.rings.resize(peers, std::vector<uint64_t>(peers));
  out.failures = run_peers(peers, [&](size_t i) {
    ferry_comm* comm = create_peer(master, settings[i]);
    grow_group(comm, static_cast<int64_t>(peers));
    size_t count = 0;
    must(ferry_comm_ring(comm, out.rings[i].data(), peers, &count), "ferry_comm_ring");
    std::vector<double> data = order_sensitive(1 << 15, i);
    ferry_allreduce_desc desc = allreduce_desc(FERRY_F64, FERRY_OP_SUM);
    must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
    out.results[i] = std::move(data);
    ferry_comm_destroy(comm);
  });
  return out;
}

// Test settings, listening on `host` ("" for the library's default, "::").
PeerSettings listening_on(const char* host) {
  PeerSettings s;
  s.listen_host = host;
  return s;
}

void check_identical(const Outcome& out) {
  REQUIRE(failures(out.failures) == "");
  for (size_t i = 0; i < out.results.size(); ++i) {
    CHECK(out.rings[i] == out.rings[0]);
    REQUIRE(out.results[i].size() == out.results[0].size());
    CHECK(std::memcmp(out.results[i].data(), out.results[0].data(), out.results[i].size() * sizeof(double)) == 0);
  }
}

}  // namespace

// Found on main: peers listened on 0.0.0.0 while the master, at [::1],
// advertised them at ::1, and it kicked two of three as unreachable.
TEST_CASE("ipv6: a master at [::1] and three peers with the default listener form one ring, results bit-identical",
          "[ipv6]") {
  if (!has_ipv6_loopback()) FAIL("this machine has no IPv6 loopback (::1)");
  WireScope scope(Wire::plain);
  EmbeddedMaster master(0, "::1");
  const PeerSettings defaults = listening_on("");
  check_identical(run_group(master.address(), {defaults, defaults, defaults}));
}

TEST_CASE("ipv6: one run mixes peers bound to 127.0.0.1, to ::1 and to both, each advertised where it listens",
          "[ipv6]") {
  if (!has_ipv6_loopback()) FAIL("this machine has no IPv6 loopback (::1)");
  WireScope scope(Wire::plain);
  // A dual-stack master: peers reach it over either family.
  EmbeddedMaster master(0, "::");
  // Every peer dials the master over IPv6; the v4-only ones must still be advertised at 127.0.0.1.
  const std::string at = "[::1]:" + std::to_string(master.port());
  check_identical(run_group(at, {listening_on("127.0.0.1"), listening_on("::1"), listening_on(""),
                                 listening_on("127.0.0.1")}));
}

TEST_CASE("ipv6: a listener that takes IPv4 only, with the master over IPv6, fails ferry_connect saying why",
          "[ipv6][misuse]") {
  if (!has_ipv6_loopback()) FAIL("this machine has no IPv6 loopback (::1)");
  WireScope scope(Wire::plain);
  EmbeddedMaster master(0, "::1");
  ferry_comm* comm = create_peer(master.address(), listening_on("0.0.0.0"));
  CHECK(ferry_connect(comm) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("takes IPv4 only") && Catch::Contains("listen on \"::\""));
  ferry_comm_destroy(comm);
}
