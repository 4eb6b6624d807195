// ferry-chaos's command line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/ferry.h"
#include "invariants.h"

namespace ferry::chaos {

// master: SIGKILL the master and start a new one on its port 0.2 to 3.2 s later.
enum class FaultKind { reset, blackhole, slow, latency, corrupt, stop, master };
inline constexpr FaultKind kAllFaults[] = {FaultKind::reset,   FaultKind::blackhole, FaultKind::slow,
                                           FaultKind::latency, FaultKind::corrupt,   FaultKind::stop,
                                           FaultKind::master};

const char* fault_name(FaultKind kind);
// "reset,blackhole,..." (or "" / "none" for no faults); throws std::invalid_argument naming a bad entry.
std::vector<FaultKind> parse_faults(const std::string& text);

struct ChaosArgs {
  int peers = 4;
  double duration_s = 120;
  std::uint64_t seed = 1;
  std::size_t size_bytes = 4 << 20;
  ferry_quant quant = FERRY_QUANT_NONE;
  std::uint32_t concurrent = 2;
  std::size_t gather_bytes = 64 << 10;  // the largest contribution to each step's all-gather; 0: none
  double kill_every_s = 20;  // 0: never
  double join_every_s = 15;  // 0: never
  double fault_every_s = 4;  // 0: never
  std::uint64_t state_every = 5;  // steps between shared-state syncs; 0: never
  // Every K-th peer started (the K-th, 2K-th, ...; 0: none) accepts no connection
  // (dial_out_only, as behind NAT), while at least as many open peers live: a ring needs
  // an open peer beside each, so kills spare the open peers that keep that true.
  int dial_out_only_every = 0;
  std::string punch = "on";  // the master's --punch: off sends every pair neither end can dial to a relay
  std::vector<FaultKind> faults;
  std::string json_path;
  std::string log_dir;       // when set: each child's stdout and stderr tail, written there at the end
  int max_peers = 0;         // 0: twice --peers
  std::string bin_dir;       // where ferry-master and ferry-chaos-peer are; default: next to ferry-chaos
  bool verbose = false;
  // An hour's soak says how it goes this often (stderr), not only at its end.
  double progress_every_s = 10;  // 0: never
  // The peers' settings; the op deadline the checker enforces derives from them.
  std::uint32_t connections = 2;
  std::uint32_t timeout_ms = 10000;
  std::uint32_t progress_ms = 5000;
  std::uint32_t heartbeat_ms = 3000;

  // What ferry.h promises per phase of an op (start <= timeout, a stall <= progress,
  // commit <= 2 x timeout), each with 5 s for a loaded machine; the transfer itself has
  // no limit in the library, so the whole op gets a generous bound that only a crawl or a hang meets.
  OpDeadlines op_deadlines() const {
    const double timeout = timeout_ms / 1000.0, progress = progress_ms / 1000.0, slack = 5;
    return {timeout + slack, progress + slack, 2 * timeout + slack, 3 * timeout + 4 * progress + 30};
  }
};

// Parses argv; on --help, --version or an error prints to stdout/stderr and returns false with *exit_code
// set (0, or 2 for a bad argument).
bool parse_chaos_args(int argc, char** argv, ChaosArgs* args, int* exit_code);

}  // namespace ferry::chaos
