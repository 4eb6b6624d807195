// ferry-wan: an emulated WAN for humans.
//
//   ferry-wan run --hosts 3 --spec rtt=50ms,loss=0.1%,rate=200mbit -- ./my-script.sh
//   ferry-wan run --topology stress/wan/topologies/three-regions.json -- ./my-script.sh
//   ferry-wan run --hosts 2                       # no command: up until Ctrl-C
//   ferry-wan cleanup                             # remove namespaces of crashed runs
//
// `run` builds the network, runs the command in the root namespace with FERRY_WAN_* variables
// naming the hosts (see WanNetwork::environment(); the command enters a host with
// `ip netns exec $FERRY_WAN_NETNS_0 ...`), then tears everything down and exits with the
// command's status. The command runs in its own process group (given the terminal when there
// is one); SIGINT/SIGTERM/SIGHUP are passed on to that group, and the network comes down after
// the command has exited (or after 5 s, by SIGKILL), taking whatever the command left running
// with it: the group in the root namespace, and every process inside the hosts.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "netns.h"
#include "tool_cli.h"  // tools/common
#include "wan_network.h"

extern char** environ;

using namespace ferry::wan;

namespace {

void print_stats(const WanNetwork& net, double seconds) {
  const WanStats s = net.stats();
  std::fprintf(stderr,
               "ferry-wan: %.1f s; forwarded %llu packets in %llu frames (%.1f MB), dropped: loss %llu, isolated %llu, "
               "ring full %llu, no route %llu, write errors %llu; packet ring peak %.1f MB; "
               "blocked SYNs %llu, queue full %llu; inbound refused: closed %llu, stateful %llu; "
               "forwarder CPU user %.2f s + sys %.2f s (%.0f%% of one core)\n",
               seconds, static_cast<unsigned long long>(s.tx_packets), static_cast<unsigned long long>(s.tx_frames),
               static_cast<double>(s.tx_bytes) / 1e6,
               static_cast<unsigned long long>(s.drop_loss), static_cast<unsigned long long>(s.drop_isolated),
               static_cast<unsigned long long>(s.drop_full), static_cast<unsigned long long>(s.drop_no_route),
               static_cast<unsigned long long>(s.write_errors), static_cast<double>(s.queue_peak_bytes) / 1e6,
               static_cast<unsigned long long>(s.drop_blocked), static_cast<unsigned long long>(s.drop_queue),
               static_cast<unsigned long long>(s.drop_closed), static_cast<unsigned long long>(s.drop_stateful),
               s.forwarder_user_s, s.forwarder_sys_s,
               seconds > 0 ? 100.0 * (s.forwarder_user_s + s.forwarder_sys_s) / seconds : 0.0);
}

double now_s() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Job control: an interactive command (a shell, say) must own the terminal to read from it.
// SIGTTOU is ignored around tcsetpgrp, which a background caller would otherwise be stopped by.
void give_terminal(pid_t pgrp) {
  if (!::isatty(STDIN_FILENO)) return;
  struct sigaction ignore{}, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGTTOU, &ignore, &old);
  ::tcsetpgrp(STDIN_FILENO, pgrp);
  ::sigaction(SIGTTOU, &old, nullptr);
}

pid_t spawn_command(const std::vector<std::string>& cmd, const WanNetwork& net) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "FERRY_WAN_", 10) != 0) env_strings.emplace_back(*e);
  for (const auto& [k, v] : net.environment()) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = cmd;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    std::fprintf(stderr, "ferry-wan: cannot run %s: %s\n", cmd[0].c_str(), std::strerror(rc));
    return -1;
  }
  give_terminal(pid);
  return pid;
}

// Waits for the command (or, with none, for a signal). Returns the exit status to report.
int supervise(pid_t child, const sigset_t& signals) {
  bool stopping = false;
  double kill_at = 0;
  for (;;) {
    if (child > 0) {
      int status = 0;
      const pid_t r = ::waitpid(child, &status, WNOHANG);
      if (r == child) {
        give_terminal(::getpgrp());
        ::kill(-child, SIGTERM);  // what the command left behind in its group
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    const timespec tick{0, 100'000'000};
    const int sig = ::sigtimedwait(&signals, nullptr, &tick);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (child <= 0) return 128 + sig;
      if (!stopping) {
        std::fprintf(stderr, "ferry-wan: signal %d, stopping the command\n", sig);
        ::kill(-child, SIGTERM);
        stopping = true;
        kill_at = now_s() + 5.0;
      }
    }
    if (stopping && now_s() > kill_at) {
      ::kill(-child, SIGKILL);
      kill_at = now_s() + 1e9;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-wan: emulated wide-area hosts (network namespaces + a userspace delay line)"};
  app.require_subcommand(1);

  int hosts = 0;
  std::string spec;
  std::string topology_file;
  bool quiet = false;
  std::vector<std::string> command;
  CLI::App* run = app.add_subcommand("run", "build the network, run a command with FERRY_WAN_* set, tear down");
  auto* hosts_opt = run->add_option("--hosts", hosts, "number of hosts (1..254; overrides hosts= in the spec)");
  auto* spec_opt =
      run->add_option("--spec", spec, "e.g. rtt=50ms,loss=0.1%,rate=200mbit,cc=cubic,seed=1 (defaults: 50ms, 0, 200mbit, cubic)");
  run->add_option("--topology", topology_file, "a JSON topology (stress/wan/topologies/, README.md) instead of a spec")
      ->excludes(hosts_opt)
      ->excludes(spec_opt);
  run->add_flag("-q,--quiet", quiet, "do not print the hosts and the forwarder's figures");
  run->add_option("command", command, "command to run (after --); none: stay up until Ctrl-C");
  run->allow_extras(false);
  app.add_subcommand("cleanup", "remove fw<pid>n<k>h<i> namespaces whose creating process is gone");

  ferry::tooling::add_version_flag(app,
                                   ferry::tooling::version_text("ferry-wan", ferry::tooling::built_ferry_version()));
  if (const auto status = ferry::tooling::parse_command_line(app, argc, argv)) return *status;

  if (app.got_subcommand("cleanup")) {
    if (::geteuid() != 0) {
      std::fprintf(stderr, "ferry-wan: needs root: network namespaces\n");
      return 1;
    }
    const auto removed = remove_stale_netns();
    for (const auto& n : removed) std::printf("removed %s\n", n.c_str());
    std::printf("%zu stale namespace(s) removed\n", removed.size());
    return 0;
  }

  // Block the stop signals before anything exists, so none can interrupt setup halfway; the
  // command gets an empty mask (spawn_command) and sees them normally.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, sig);
  ::sigprocmask(SIG_BLOCK, &signals, nullptr);

  try {
    WanConfig config = WanConfig::parse(spec);
    if (hosts) {
      config.hosts = hosts;
      config.validate();
    }
    WanNetwork net = topology_file.empty() ? WanNetwork::start(config) : WanNetwork::start(Topology::load(topology_file));
    if (!quiet && topology_file.empty()) {
      std::fprintf(stderr, "ferry-wan: %s (tbf burst %llu B, limit %llu B)\n", config.to_string().c_str(),
                   static_cast<unsigned long long>(config.tbf_burst_bytes()),
                   static_cast<unsigned long long>(config.tbf_limit_bytes()));
    }
    if (!quiet && !topology_file.empty()) std::fprintf(stderr, "ferry-wan: %s", net.topology().describe().c_str());
    if (!quiet) {
      for (const Host& h : net.hosts())
        std::fprintf(stderr, "  host %d  %-15s %-16s netns %s\n", h.index, h.ip.c_str(), h.name.c_str(), h.netns.c_str());
      if (command.empty()) std::fprintf(stderr, "ferry-wan: up; Ctrl-C to tear down\n");
    }
    const double t0 = now_s();
    pid_t child = -1;
    if (!command.empty()) {
      child = spawn_command(command, net);
      if (child < 0) return 127;
    }
    const int status = supervise(child, signals);
    if (!quiet) print_stats(net, now_s() - t0);
    net.stop();
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-wan: %s\n", e.what());
    return 1;
  }
}
