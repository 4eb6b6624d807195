// A run as the master sees it at one moment: groups, rings, joiners, the
// collectives in flight and whom they wait for, the links, the peers. Built
// by MasterState::view() on the master's thread and then handed, as a value,
// to whatever publishes it (the HTTP endpoint: status_json.h, master_metrics.h).
// Times are the master state's clock (ms).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry::master {

struct InFlightView {
  uint32_t seq = 0;
  uint8_t kind = 0;       // wire::CollectiveKind
  uint64_t tag = 0;
  uint64_t bytes = 0;     // one member's contribution
  bool transferring = false;  // false: waiting for members to begin it; true: go sent, waiting for their ends
  uint64_t started_ms = 0;    // its first begin
  std::vector<uint64_t> waiting_for;  // members the master still waits for in that phase
};

struct LinkView {
  uint64_t from = 0;
  uint64_t to = 0;
  bool unreachable = false;
  bool shared_memory = false;  // same host: bandwidth_Bps is the matrix's stand-in (1e12), not a measurement
  double bandwidth_Bps = 0;  // what the pair can carry (link_matrix.h: capacity); 0 when unreachable
  double rtt_s = 0;
  uint64_t age_ms = 0;
};

struct GroupView {
  uint32_t id = 0;
  uint64_t epoch = 0;
  bool broken = false;
  std::optional<uint64_t> shared_revision;
  std::vector<uint64_t> ring;     // ring order
  struct RelayedHop {
    uint64_t from = 0, to = 0, relay = 0;
  };
  std::vector<RelayedHop> relayed_hops;  // the ring's links a relay forwards (relay_choice.h)
  std::vector<uint64_t> waiting;  // joiners
  std::vector<uint64_t> voting;   // members whose topology vote is not decided yet
  // The smallest bandwidth along the ring, and along the ring in arrival
  // order (ids grow with arrival): what ordering bought. Unset until every hop is measured, and
  // when every hop is through shared memory (which is never the bottleneck).
  std::optional<double> ring_bottleneck_Bps;
  std::optional<double> arrival_bottleneck_Bps;
  std::vector<InFlightView> in_flight;
  std::vector<LinkView> links;
};

struct PeerView {
  uint64_t id = 0;
  uint32_t group = 0;
  std::optional<uint32_t> rank;  // its ring position; unset while joining
  std::string address;           // where its neighbours dial it, "HOST:PORT"
  std::string host;              // where its connection to the master came from
  bool member = false;           // false: joining
  uint64_t joined_ms = 0;
  uint64_t heard_ms = 0;         // the last message from it
  uint64_t collectives_ok = 0;
  uint64_t collectives_failed = 0;
  std::string label;             // what the peer says of itself (ferry_comm_set_label); empty: nothing
};

struct RunView {
  uint64_t now_ms = 0;
  size_t connections = 0;
  std::vector<GroupView> groups;
  std::vector<PeerView> peers;
};

}  // namespace ferry::master
