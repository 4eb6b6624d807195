// The link matrix a ferry-bench run measured (ferry_comm_link_matrix), from the
// peer that reads it to the "link_matrix" section of --json.
//
// After the last size every peer asks the master for the matrix (which sends the
// peer's own unreported measurements first), then all meet at a barrier, so the
// master has every peer's latest figures; rank 0 reads the matrix again and prints
// one more line on its report stdout (rank_report.h):
//   {"link_matrix":[{"from_peer":1,"to_peer":2,"goodput_bytes_per_s":2.1e7,
//                    "delivery_rate_bytes_per_s":2.4e7,"rtt_ms":50.3,"retransmit_ratio":0.001,
//                    "bytes":6291456,"shared_memory":false,"age_s":0.4,"connections":16}, ...]}
// A last barrier keeps the others in the group until rank 0 has it: the master's
// matrix holds members only.
//
// The orchestrator names each end by the ids the peers reported with their sizes
// (rank, peer index) and the host the launcher placed that peer on.
#pragma once

#include <ferry/ferry.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "json.h"  // tools/common

namespace ferry::bench {

struct LinkEnd {
  std::uint64_t peer_id = 0;  // FERRY_ATTR_PEER_ID
  int rank = -1;              // -1: no peer of this run reported that id
  int peer_index = -1;
  std::string host;           // the emulated WAN's host name; "" on loopback
};

// One measured ordered pair: ferry_link_info's figures.
struct LinkMeasurement {
  LinkEnd from, to;
  bool shared_memory = false;
  double goodput_Bps = 0;
  double delivery_rate_Bps = 0;
  double rtt_ms = 0;
  double retransmit_ratio = 0;
  std::uint64_t bytes = 0;
  double age_s = 0;
  std::uint32_t connections = 0;  // lanes in use when measured
};

// ferry_comm_link_matrix, every entry. Throws PeerFailure (peer_session.h).
std::vector<LinkMeasurement> query_link_matrix(ferry_comm* comm);

// The peer's report line above, and its parsed form: std::nullopt for any other line.
std::string link_matrix_line(const std::vector<LinkMeasurement>& links);
std::optional<std::vector<LinkMeasurement>> parse_link_matrix_line(const tooling::JsonValue& line);

// Who each peer id is in this run.
using LinkEndsById = std::map<std::uint64_t, LinkEnd>;
void name_link_ends(std::vector<LinkMeasurement>& links, const LinkEndsById& ends);

// "link_matrix": [...] with from/to as {"rank", "peer_index", "peer_id", "host"} (host null on loopback).
void write_link_matrix(tooling::JsonWriter& json, const std::vector<LinkMeasurement>& links);

}  // namespace ferry::bench
