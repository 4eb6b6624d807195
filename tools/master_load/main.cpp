// ferry-master-load: how much a ferry-master spends on a large run. Starts a
// real ferry-master, connects N fake peers that speak the real protocol
// (fake_peer.h) and reports admission, topology votes and collective rounds,
// in wall time and master CPU (see tools/bench/README.md, "Load on the master").
//
// A tool of its own, not a ferry-bench mode: ferry-bench links only the
// public C API (whose peers do real p2p transfers), while fake peers need the
// layers below it (wire, net, peer/master_session).
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>

#include "core/log.h"
#include "json.h"  // tools/common
#include "load_run.h"
#include "tool_cli.h"  // tools/common
#include "wire/frame.h"

namespace {

using ferry::master_load::LoadOptions;
using ferry::master_load::LoadResult;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitIncomplete = 3;  // a peer was not admitted or a collective did not commit

// Next to this executable (an install), else the build tree's tools/master.
std::string default_master_bin() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path here = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (const fs::path& candidate : {here / "ferry-master", here / ".." / "master" / "ferry-master"})
    if (fs::exists(candidate, ec)) return candidate.lexically_normal().string();
  return "ferry-master";  // from PATH
}

double ms(double s) { return s * 1e3; }

void print_table(const LoadOptions& o, const LoadResult& r) {
  const double collectives_per_round = o.groups;
  std::printf("# ferry-master-load: %u peers in %u group(s), %u votes, %u rounds, master log level %s\n", o.peers,
              o.groups, o.votes, o.rounds, o.master_log_level.c_str());
  std::printf("%-34s %12s %18s\n", "phase", "wall", "master CPU");
  std::printf("%-34s %10.3f s %15.3f ms\n", ("admit " + std::to_string(r.admitted) + " peers").c_str(), r.admit_s,
              ms(r.admit_master_cpu_s));
  std::printf("%-34s %10.3f ms %15.3f ms\n", "  per join", ms(r.admit_s) / o.peers, ms(r.admit_master_cpu_s) / o.peers);
  std::printf("%-34s %10.3f ms %15.3f ms\n", "topology vote (ring stands)", ms(r.vote_s), ms(r.vote_master_cpu_s));
  std::printf("%-34s %10.3f ms %15.3f ms\n", "collective round (all groups)", ms(r.round_s), ms(r.round_master_cpu_s));
  std::printf("%-34s %10s    %15.3f ms\n", "  per collective", "", ms(r.round_master_cpu_s) / collectives_per_round);
  std::printf("# %lu of %lu verdicts committed, %lu aborted\n", static_cast<unsigned long>(r.committed),
              static_cast<unsigned long>(r.expected_commits), static_cast<unsigned long>(r.aborted));
}

std::string json_report(const LoadOptions& o, const LoadResult& r) {
  ferry::tooling::JsonWriter w;
  w.begin_object().newline(2);
  w.key("tool").value("ferry-master-load").newline(2);
  w.key("args").begin_object();
  w.key("peers").value(o.peers).key("groups").value(o.groups).key("rounds").value(o.rounds);
  w.key("votes").value(o.votes).key("threads").value(o.threads).key("master_log_level").value(o.master_log_level);
  w.end_object().newline(2);
  utsname host{};
  ::uname(&host);
  w.key("machine").begin_object().key("nproc").value(static_cast<int64_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  w.key("kernel").value(std::string(host.release));
  w.end_object().newline(2);
  w.key("welcomed").value(r.welcomed).newline(2);
  w.key("admitted").value(r.admitted).newline(2);
  w.key("admit_votes").value(r.admit_votes).newline(2);
  w.key("admit_s").value(r.admit_s).newline(2);
  w.key("admit_master_cpu_s").value(r.admit_master_cpu_s).newline(2);
  w.key("master_cpu_ms_per_join").value(ms(r.admit_master_cpu_s) / o.peers).newline(2);
  w.key("vote_s").value(r.vote_s).newline(2);
  w.key("vote_master_cpu_ms").value(ms(r.vote_master_cpu_s)).newline(2);
  w.key("round_s").value(r.round_s).newline(2);
  w.key("round_master_cpu_ms").value(ms(r.round_master_cpu_s)).newline(2);
  w.key("collective_master_cpu_ms").value(ms(r.round_master_cpu_s) / o.groups).newline(2);
  w.key("committed").value(r.committed).newline(2);
  w.key("aborted").value(r.aborted).newline(2);
  w.key("expected_commits").value(r.expected_commits).newline(2);
  w.key("abort_log").value(r.abort_log).newline(0);
  w.end_object();
  return w.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-master-load: a real ferry-master under N fake peers; admission, votes and collective rounds "
               "in wall time and master CPU"};
  LoadOptions o;
  std::string json_path;
  app.add_option("--peers", o.peers, "fake peers")->check(CLI::Range(1u, 4096u))->capture_default_str();
  app.add_option("--groups", o.groups, "peer groups (peer i joins group i mod G)")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "collective rounds (begin, go, end, commit) per group")->capture_default_str();
  app.add_option("--votes", o.votes, "topology votes with nobody waiting")->capture_default_str();
  app.add_option("--threads", o.threads, "threads running the fake peers' sessions")
      ->check(CLI::Range(1u, 64u))
      ->capture_default_str();
  app.add_option("--master-bin", o.master_bin, "the ferry-master to run (default: next to this program)");
  app.add_option("--master-log-level", o.master_log_level, "ferry-master's --log-level")->capture_default_str();
  app.add_option("--timeout-s", o.timeout_s, "deadline of each phase")->capture_default_str();
  app.add_option("--json", json_path, "also write the figures to this file");
  ferry::tooling::add_version_flag(app, ferry::tooling::version_text("ferry-master-load",
                                                                     ferry::tooling::built_ferry_version(),
                                                                     ferry::wire::kProtocolVersion));
  if (const auto status = ferry::tooling::parse_command_line(app, argc, argv)) return *status;
  if (o.groups > o.peers) {
    std::fprintf(stderr, "ferry-master-load: --groups %u needs at least as many --peers\n", o.groups);
    return ferry::tooling::kExitBadArguments;
  }
  if (o.master_bin.empty()) o.master_bin = default_master_bin();
  ferry::set_log_level("warn");  // the fake peers' own sessions

  try {
    const LoadResult result = ferry::master_load::run_master_load(o);
    print_table(o, result);
    if (!json_path.empty()) ferry::tooling::write_text_file(json_path, json_report(o, result), "--json");
    if (result.admitted != o.peers || result.committed != result.expected_commits) return kExitIncomplete;
    return kExitOk;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ferry-master-load: %s\n", e.what());
    return kExitFailed;
  }
}
