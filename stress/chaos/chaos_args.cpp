#include "chaos_args.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "byte_size.h"  // tools/common
#include "chaos_data.h"
#include "quant_names.h"  // tools/common
#include "tool_cli.h"     // tools/common

namespace ferry::chaos {

const char* fault_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::reset: return "reset";
    case FaultKind::blackhole: return "blackhole";
    case FaultKind::slow: return "slow";
    case FaultKind::latency: return "latency";
    case FaultKind::corrupt: return "corrupt";
    case FaultKind::stop: return "stop";
    case FaultKind::master: return "master";
  }
  return "?";
}

std::vector<FaultKind> parse_faults(const std::string& text) {
  std::vector<FaultKind> out;
  if (text.empty() || text == "none") return out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    bool known = false;
    for (FaultKind kind : kAllFaults)
      if (item == fault_name(kind)) {
        known = true;
        if (std::find(out.begin(), out.end(), kind) == out.end()) out.push_back(kind);
      }
    if (!known) throw std::invalid_argument("unknown fault '" + item + "' (reset, blackhole, slow, latency, corrupt, stop, master)");
  }
  return out;
}

bool parse_chaos_args(int argc, char** argv, ChaosArgs* args, int* exit_code) {
  CLI::App app{"ferry-chaos: ferry-master and N peers under kills, joins and network faults, with invariants checked"};
  std::string size = "4M", quant = "none", faults;
  app.add_option("--peers", args->peers, "peers at the start")->check(CLI::Range(2, 64))->capture_default_str();
  app.add_option("--duration", args->duration_s, "seconds of chaos (then quiescence and the final checks)")
      ->check(CLI::Range(1.0, 86400.0))
      ->capture_default_str();
  app.add_option("--seed", args->seed, "seeds the schedule and every input")->capture_default_str();
  app.add_option("--size", size, "bytes per all-reduce (f32), e.g. 4M")->capture_default_str();
  app.add_option("--quant", quant, CLI::detail::join(tooling::quant_names(), "|"))->capture_default_str();
  app.add_option("--concurrent", args->concurrent, "all-reduces in flight per step")
      ->check(CLI::Range(1u, 16u))
      ->capture_default_str();
  app.add_option("--gather-bytes", args->gather_bytes,
                 "every step also all-gathers up to this many bytes per peer (value-checked; 0: no all-gather)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{64} << 20))
      ->capture_default_str();
  app.add_option("--kill-every", args->kill_every_s, "SIGKILL a random peer this often (0: never)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--join-every", args->join_every_s, "start a new peer this often (0: never)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--faults", faults, "comma-separated: reset,blackhole,slow,latency,corrupt,stop,master");
  app.add_option("--fault-every", args->fault_every_s, "inject one fault this often (0: never)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--state-every", args->state_every, "sync the peers' shared state every this many steps (0: never)")
      ->capture_default_str();
  app.add_option("--dial-out-only-every", args->dial_out_only_every,
                 "every K-th peer started accepts no connection (dial_out_only: no p2p listener, as behind NAT), "
                 "while at most one more of them than of open peers lives (two such neighbours punch through, or an open "
                 "peer relays their link; 0: none)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  app.add_option("--punch", args->punch,
                 "the master's --punch: off has every pair of dial-out-only neighbours relayed by an open peer "
                 "(on loopback every punch succeeds, so this is how a run exercises relays)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--json", args->json_path, "write the summary here");
  app.add_option("--log-dir", args->log_dir,
                 "write each child's stdout and its last 64 KiB of stderr here at the end (peer-N.out, peer-N.err, "
                 "master-N.out, ...)");
  app.add_option("--max-peers", args->max_peers, "no joins beyond this many live peers (default 2 x --peers)");
  app.add_option("--bin-dir", args->bin_dir, "directory holding ferry-master and ferry-chaos-peer");
  app.add_option("--connections", args->connections, "p2p connections per neighbour")->capture_default_str();
  app.add_option("--timeout-ms", args->timeout_ms, "peers' timeout_ms")->capture_default_str();
  app.add_option("--progress-ms", args->progress_ms, "peers' progress_timeout_ms")->capture_default_str();
  app.add_option("--heartbeat-ms", args->heartbeat_ms, "peers' heartbeat_timeout_ms")->capture_default_str();
  app.add_flag("--verbose", args->verbose, "echo every child's stderr");
  app.add_option("--progress-every", args->progress_every_s,
                 "print a progress line on stderr this often, in seconds (0: never)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  tooling::add_version_flag(app, tooling::version_text("ferry-chaos", ferry_version()));
  if (const auto status = tooling::parse_command_line(app, argc, argv)) {
    *exit_code = *status;
    return false;
  }
  try {
    args->size_bytes = tooling::parse_byte_size(size);
    if (args->size_bytes % sizeof(float) != 0) throw std::invalid_argument("--size must be a multiple of 4");
    const std::optional<ferry_quant> parsed = tooling::parse_quant(quant);
    if (!parsed) throw std::invalid_argument("--quant: unknown '" + quant + "'");
    args->quant = *parsed;
    args->faults = parse_faults(faults);
    if (args->max_peers == 0) args->max_peers = 2 * args->peers;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ferry-chaos: %s\n", e.what());
    *exit_code = tooling::kExitBadArguments;
    return false;
  }
  return true;
}

}  // namespace ferry::chaos
