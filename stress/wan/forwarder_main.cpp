// ferry-wan-forwarder: the delay-line process WanNetwork spawns. Not meant to be run by hand.
//
//   ferry-wan-forwarder --netns A,B,C --seed S --store-bytes B
//                       --shared-fd F --ready-fd R [--parent-pid P] [--offload 0|1]
//   ferry-wan-forwarder --version
//
// A bad argument exits 2, as on every ferry tool (tools/common/tool_cli.h); a failure after, 1.
//
// It opens one TUN (named wan0) in each namespace, in that order (host i = namespace i),
// writes "ok\n" (or "error: <why>\n") to the ready fd and closes it, then forwards until
// SIGTERM/SIGINT/SIGHUP (WanNetwork::stop(), which then removes the namespaces itself) or until
// the parent process exits. In the second case the parent could not clean up (Ctrl-C, a
// crash, SIGKILL), so the forwarder does it: it stops what runs inside the namespaces and
// deletes them. That is why callers need no signal handlers of their own; it runs in its own
// process group, so a Ctrl-C meant for the caller does not reach it. The loss probability and the
// isolation flags are read live from the shared memory (fd F: a WanShared and the per-pair and
// per-host tables after it, wan_shared.h), where the delays, caps and downlinks are too, and
// the counters are published there.
//
// A separate binary rather than a fork() of the caller: the callers (ferry-bench, ferry-chaos,
// Catch2 tests) are multi-threaded, where a forked child may only call async-signal-safe
// functions until it execs; an exec'd binary starts clean, shows up by name in ps/top (which
// is how its CPU use is measured), and holds nothing of its parent but the two fds it is given.
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "forwarder.h"
#include "netns.h"
#include "tool_cli.h"  // tools/common
#include "tun_device.h"
#include "wan_shared.h"

using namespace ferry::wan;

namespace {

// A command line it cannot use: exit status 2, as every ferry tool (tool_cli.h).
class BadArgument : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void report(int fd, const std::string& line) {
  if (fd < 0) return;
  const std::string s = line + "\n";
  [[maybe_unused]] ssize_t n = ::write(fd, s.data(), s.size());
}

uint64_t to_u64(const char* flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno || end == text || *end) throw BadArgument(std::string("bad number for ") + flag + ": " + text);
  return v;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t pos = s.find(sep, start);
    const size_t end = pos == std::string::npos ? s.size() : pos;
    if (end > start) out.push_back(s.substr(start, end - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int ready_fd = -1;
  try {
    std::vector<std::string> netns;
    ForwarderOptions opts;
    int shared_fd = -1;
    long parent_pid = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--version") {
        std::puts(ferry::tooling::version_text("ferry-wan-forwarder", ferry::tooling::built_ferry_version()).c_str());
        return 0;
      }
      if (i + 1 >= argc) throw BadArgument("missing value for " + flag);
      const char* value = argv[++i];
      if (flag == "--netns") netns = split(value, ',');
      else if (flag == "--seed") opts.seed = to_u64(argv[i - 1], value);
      else if (flag == "--store-bytes") opts.packet_store_bytes = to_u64(argv[i - 1], value);
      else if (flag == "--shared-fd") shared_fd = static_cast<int>(to_u64(argv[i - 1], value));
      else if (flag == "--ready-fd") ready_fd = static_cast<int>(to_u64(argv[i - 1], value));
      else if (flag == "--offload") opts.offload = to_u64(argv[i - 1], value) != 0;
      else if (flag == "--parent-pid") parent_pid = static_cast<long>(to_u64(argv[i - 1], value));
      else throw BadArgument("unknown flag " + flag);
    }
    if (netns.empty() || netns.size() > static_cast<size_t>(kMaxHosts))
      throw BadArgument("--netns needs 1..254 namespace names");
    if (shared_fd < 0) throw BadArgument("--shared-fd is required");

    // Watch the parent process (not thread: PR_SET_PDEATHSIG would fire when the *thread*
    // that spawned us exits, and callers may start a network from a short-lived thread).
    if (parent_pid > 0) {
      opts.parent_pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(parent_pid), 0));
      if (opts.parent_pidfd < 0) throw std::runtime_error("parent is gone (pidfd_open failed)");
    }

    struct stat st {};
    const size_t bytes = shared_bytes(netns.size());
    if (::fstat(shared_fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes)
      throw std::runtime_error("shared memory does not match the number of hosts");
    void* page = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, shared_fd, 0);
    if (page == MAP_FAILED) throw std::runtime_error(std::string("mmap shared memory: ") + std::strerror(errno));
    ::close(shared_fd);
    auto* shared = static_cast<WanShared*>(page);
    if (shared->magic != kSharedMagic || shared->hosts != netns.size())
      throw std::runtime_error("shared memory does not match (magic/hosts)");

    for (const std::string& name : netns) opts.tun_fds.push_back(open_tun_in_netns(name, kTunName, opts.offload));

    // Release times are in microseconds' reach only if the timer is allowed to be precise.
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    Forwarder forwarder(std::move(opts), shared);
    report(ready_fd, "ok");
    ::close(ready_fd);
    ready_fd = -1;
    if (forwarder.run() == Forwarder::Exit::kParentGone)
      for (const std::string& name : netns) remove_netns(name, 500);
    return 0;
  } catch (const BadArgument& e) {
    if (ready_fd >= 0) report(ready_fd, std::string("error: ") + e.what());
    std::fprintf(stderr, "ferry-wan-forwarder: %s\n", e.what());
    return ferry::tooling::kExitBadArguments;
  } catch (const std::exception& e) {
    if (ready_fd >= 0) report(ready_fd, std::string("error: ") + e.what());
    std::fprintf(stderr, "ferry-wan-forwarder: %s\n", e.what());
    return 1;
  }
}
