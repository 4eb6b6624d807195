// Named network namespaces (the /run/netns/<name> ones `ip netns` manages): entering one on
// the current thread, and removing ours, including those a crashed run left behind.
//
// Our names are fw<pid>n<k>h<i>: pid of the process that made the network, k-th network of
// that process, host i. The pid makes two processes (or two engineers' test runs) never
// clash, and tells cleanup which namespaces are stale: those whose pid no longer runs.
#pragma once

#include <string>
#include <vector>

namespace ferry::wan {

// Enters the named namespace on the calling thread for the lifetime of the object, and
// returns to the previous one on destruction. Throws std::system_error when the namespace
// does not exist or setns is refused. Sockets created meanwhile stay in the namespace after
// the guard is gone: that is how a test or a tool opens a socket "on" an emulated host
// without spawning a process. Only the calling thread moves; other threads are unaffected.
class ScopedNetns {
 public:
  explicit ScopedNetns(const std::string& netns_name);
  ~ScopedNetns();
  ScopedNetns(const ScopedNetns&) = delete;
  ScopedNetns& operator=(const ScopedNetns&) = delete;

 private:
  int original_fd_ = -1;
};

std::string netns_name(int pid, int network, int host);  // fw<pid>n<k>h<i>
// Parses one of our names; false for anything else (other people's namespaces).
bool parse_netns_name(const std::string& name, int& pid, int& network, int& host);
bool netns_exists(const std::string& name);
// Every name in /run/netns.
std::vector<std::string> list_netns();

// Stops every process still inside the namespace (SIGTERM, then SIGKILL after grace_ms;
// never this process), then deletes the name. Returns false when `ip netns del` failed.
bool remove_netns(const std::string& name, int grace_ms = 500);

// Removes our namespaces whose creating process is gone. Returns the names removed.
std::vector<std::string> remove_stale_netns();

}  // namespace ferry::wan
