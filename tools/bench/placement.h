// Where each process of a benchmark runs: the one seam between "what to run"
// (the orchestrator) and "on which host" (a Launcher).
//
// A Launcher turns (role, host index) into a Placement: an argv prefix that
// puts the process on its host, and the address it binds and others dial
// there. Today there is LocalLauncher (everything on 127.0.0.1, no prefix).
// An emulated WAN (network namespaces) is another Launcher whose prefix is
// {"ip", "netns", "exec", NAME} and whose host is the namespace's address; the
// orchestrator needs no change for it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace ferry::bench {

// tcp_endpoint: either end of the sync workload's raw TCP baseline.
enum class ProcessRole { master, ferry_peer, gloo_rank, tcp_endpoint };

struct Placement {
  std::vector<std::string> argv_prefix;  // prepended to the program's argv
  std::string host;                      // the host's address: what others dial
  std::string where;                     // for messages: "127.0.0.1", "netns h2 (10.9.0.2)"
  std::string host_name;                 // the emulated WAN's name for the host ("site-a", "h2"); "" locally
  // Every address of the host, `host` first: an emulated host may have one in each family.
  std::vector<std::string> addresses;
  // What ferry's processes listen on: `host`, or "::" (both families) when there are two.
  std::string listen_host() const { return addresses.size() > 1 ? "::" : host; }
};

// "HOST:PORT", with an IPv6 host in brackets.
std::string host_port(const std::string& host, const std::string& port);
// The address of `to` that a process at `from` can dial: to's first address in a family
// `from` has; to.host when they share none (nothing will connect, and the run says so).
std::string reachable_host(const Placement& from, const Placement& to);

class Launcher {
 public:
  virtual ~Launcher() = default;
  // host_index: the peer's or Gloo rank's index (0..N-1); 0 for the master.
  virtual Placement place(ProcessRole role, int host_index) const = 0;
  // One line for the table header and the JSON record: "local (127.0.0.1)".
  virtual std::string describe() const = 0;
};

// Every process on this machine, on 127.0.0.1.
std::unique_ptr<Launcher> make_local_launcher();

}  // namespace ferry::bench
