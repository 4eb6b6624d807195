// What every peer process of ferry-bench shares, whatever it measures: joining
// the group through the public C API, the barrier that starts peers together,
// page-aligned buffers, and a stdout reserved for the JSON lines the
// orchestrator parses.
#pragma once

#include <ferry/ferry.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench_args.h"

namespace ferry::bench {

// A ferry call failed; what() says which, with ferry_last_error().
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws PeerFailure unless `result` is FERRY_OK.
void must(ferry_result result, const std::string& what);

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

ferry_dtype ferry_dtype_of(ElemType type);

// Page-aligned, so every element type (and any vector width) is aligned. Throws PeerFailure.
Buffer allocate(std::size_t bytes);

class PeerSession {
 public:
  explicit PeerSession(const BenchArgs& args) : args_(args) {}
  ~PeerSession() { ferry_comm_destroy(comm_); }
  PeerSession(const PeerSession&) = delete;
  PeerSession& operator=(const PeerSession&) = delete;

  // Creates the communicator, connects, and updates the topology until the
  // group holds args.peers peers (accepted peers admit newcomers together).
  void join();
  // A one-element all-reduce: the master's commit releases every peer at about the same moment.
  void barrier();

  ferry_comm* comm() const { return comm_; }
  int rank() const { return rank_; }
  int world() const { return world_; }
  std::uint64_t peer_id() const { return static_cast<std::uint64_t>(attribute(FERRY_ATTR_PEER_ID)); }
  // Ring connections (out + in) that the ring built by join() runs over shared memory.
  std::int64_t shared_memory_lanes() const { return attribute(FERRY_ATTR_SHARED_MEMORY_LANES); }
  std::int64_t next_link_relay() const { return attribute(FERRY_ATTR_NEXT_LINK_RELAY); }
  std::int64_t relayed_bytes() const { return attribute(FERRY_ATTR_RELAYED_BYTES); }

  // "ferry-bench peer I: ..." on stderr. `this` is argument 1 for the format attribute.
  __attribute__((format(printf, 2, 3))) void log(const char* format, ...) const;

 private:
  std::int64_t attribute(ferry_attribute which) const;

  const BenchArgs& args_;
  ferry_comm* comm_ = nullptr;
  int world_ = 0;
  int rank_ = 0;
};

// The frame of a peer process: points fd 1 at stderr (keeping the real stdout
// for the report lines, so nothing else printed can corrupt them), joins the
// group, runs `body`, and maps the outcome to the exit status: 0 when body returned true,
// 3 when it returned false (a result was wrong), 1 on PeerFailure.
int run_peer_process(const BenchArgs& args, const std::function<bool(PeerSession& session, std::FILE* reports)>& body);

}  // namespace ferry::bench
