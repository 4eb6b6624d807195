// Test scaffolding over the public C API: an embedded master, peers with
// test-friendly settings, and a runner that drives N peers on N threads.
// Catch2 assertions are not thread-safe, so peer threads only record what
// happened; the test's own thread asserts afterwards.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <chrono>
#include <string>
#include <vector>

#include "ferry/ferry.h"

namespace ferry::test {

// A failed ferry call, carrying its result and message.
struct CallFailed : std::runtime_error {
  CallFailed(ferry_result r, const std::string& what) : std::runtime_error(what), result(r) {}
  ferry_result result;
};

// Throws CallFailed unless r == FERRY_OK.
void must(ferry_result r, const char* what);

// What a run's connections speak. Tests that must hold for each take
//   const Wire wire = GENERATE(Wire::plain, Wire::tls, Wire::shm); WireScope scope(wire);
// and the masters and peers the harness makes in that scope use it.
// plain and tls keep every byte on the (loopback) connection; shm is plain
// connections with the ring's bytes in shared memory (ferry_comm_params.shared_memory).
enum class Wire { plain, tls, shm };
const char* wire_name(Wire wire);
// One run of a test that sweeps wires, world sizes and connection counts.
struct WireRun {
  Wire wire;
  size_t peers;
  uint32_t connections;
};
Wire current_wire();
class WireScope {
 public:
  explicit WireScope(Wire wire);
  ~WireScope();
  WireScope(const WireScope&) = delete;
  WireScope& operator=(const WireScope&) = delete;

 private:
  Wire before_;
};

// Throwaway certificates, made once per process (tools/gen-test-certs, in a
// temporary directory removed at exit): "ca" signed "master" and "peer";
// "rogue-ca" signed "rogue"; "both-ca.pem" holds both CAs.
// cert_path("peer.pem"), cert_path("peer.key"), ...
const std::string& cert_path(const std::string& file);

class EmbeddedMaster {
 public:
  // Speaks current_wire(): TLS with master.pem, peers verified against ca.pem.
  // link_max_age_ms: ferry_master_params.link_max_age_ms; 0 keeps the default.
  // host: the address it listens on (and address() names), an IP literal.
  // port: the port it listens on (0: any free one).
  // punch: ferry_master_params.punch (false: pairs neither end can dial go straight to a relay,
  // which loopback otherwise never needs, since every punch gets through).
  explicit EmbeddedMaster(uint32_t link_max_age_ms = 0, std::string host = "127.0.0.1", uint16_t port = 0,
                          bool punch = true);
  ~EmbeddedMaster();
  EmbeddedMaster(const EmbeddedMaster&) = delete;
  EmbeddedMaster& operator=(const EmbeddedMaster&) = delete;
  std::string address() const;
  uint16_t port() const { return port_; }
  // ferry_master_stop: the peers are told the master is gone (they fail with MASTER_LOST at once).
  void stop();
  // ferry_master_stop_for_restart: closed as a crash would, so peers keep their reconnect window.
  void stop_for_restart();

 private:
  ferry_master* master_ = nullptr;
  std::string host_;
  uint16_t port_ = 0;
};

struct PeerSettings {
  uint32_t group = 0;
  uint32_t connections = 2;
  uint32_t io_threads = 1;
  uint32_t timeout_ms = 20000;
  uint32_t progress_timeout_ms = 10000;
  uint32_t heartbeat_timeout_ms = 5000;
  uint32_t max_chunk_bytes = 1 << 20;
  // ferry_comm_params.shared_memory: -1 as the wire says (on for Wire::shm only), else 0 or 1.
  int shared_memory = -1;
  // ferry_comm_params.p2p_listen_host; "" keeps the library's default ("::").
  std::string listen_host = "127.0.0.1";
  uint16_t port = 0;             // p2p_port_min = p2p_port_max; 0: any free one
  uint16_t advertised_port = 0;  // what the master tells neighbours to dial (a proxy's); 0: the listener's
  uint32_t master_reconnect_timeout_ms = 300'000;  // the library's default
  bool dial_out_only = false;  // ferry_comm_params.dial_out_only: no listener, its links dialed from its side
  // TLS files for a peer made while current_wire() is Wire::tls.
  std::string tls_cert = "peer.pem", tls_key = "peer.key", tls_ca = "ca.pem";
};

// A peer of current_wire() (TLS: settings' certificate files, by cert_path name).
ferry_comm* create_peer(const std::string& master, const PeerSettings& settings = {});
int64_t attribute(ferry_comm* comm, ferry_attribute attribute);
// ferry_connect, then ferry_update_topology until the group has `target` peers.
// Every peer of a group must call it with the same target.
void grow_group(ferry_comm* comm, int64_t target);
// The same for a peer already connected. Throws std::runtime_error, naming the sizes, when the
// group is still smaller after `deadline` (peers evicted or refused: else the loop never ends).
void wait_for_group(ferry_comm* comm, int64_t target,
                    std::chrono::milliseconds deadline = std::chrono::milliseconds(120'000));

// A descriptor with the given fields and the library's defaults for the rest.
ferry_allreduce_desc allreduce_desc(ferry_dtype dtype, ferry_reduce_op op, ferry_quant quant = FERRY_QUANT_NONE,
                                    uint64_t tag = 0);

// Runs body(rank) on `peers` threads and joins them. Returns one entry per
// rank: empty when body returned, else the failure's message.
std::vector<std::string> run_peers(size_t peers, const std::function<void(size_t rank)>& body);
// "" when every entry is empty, else all failures joined, for one REQUIRE.
std::string failures(const std::vector<std::string>& results);

}  // namespace ferry::test
