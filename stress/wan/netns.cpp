#include "netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <exception>
#include <fstream>
#include <sstream>
#include <system_error>
#include <thread>

#include "command.h"

namespace ferry::wan {
namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// Pids whose (main thread's) network namespace is `name`, as `ip netns pids` finds them.
std::vector<pid_t> pids_in(const std::string& name) {
  std::vector<pid_t> pids;
  const CommandResult r = run_command({"ip", "netns", "pids", name});
  if (r.status != 0) return pids;
  std::istringstream in(r.output);
  long pid = 0;
  while (in >> pid) {
    if (pid > 0 && pid != ::getpid()) pids.push_back(static_cast<pid_t>(pid));
  }
  return pids;
}

bool read_int(const std::string& s, size_t& pos, int& out) {
  const char* first = s.data() + pos;
  const char* last = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec != std::errc() || ptr == first || *first == '-' || *first == '+') return false;
  pos = static_cast<size_t>(ptr - s.data());
  return true;
}

// A process that exited but was not reaped yet (a zombie) counts as gone: its namespaces are
// stale, and kill(pid, 0) alone would call it alive.
bool process_alive(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || (line[paren + 2] != 'Z' && line[paren + 2] != 'X');
}

}  // namespace

ScopedNetns::ScopedNetns(const std::string& netns_name) {
  original_fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (original_fd_ < 0) throw_errno("open /proc/thread-self/ns/net");
  const std::string path = "/run/netns/" + netns_name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    ::close(original_fd_);
    errno = e;
    throw_errno("open " + path);
  }
  if (::setns(fd, CLONE_NEWNET) != 0) {
    const int e = errno;
    ::close(fd);
    ::close(original_fd_);
    errno = e;
    throw_errno("setns " + path);
  }
  ::close(fd);
}

ScopedNetns::~ScopedNetns() {
  // Going back can only fail if the original namespace fd is unusable, which would be a bug;
  // staying in the wrong namespace silently would be worse than stopping here.
  if (::setns(original_fd_, CLONE_NEWNET) != 0) std::terminate();
  ::close(original_fd_);
}

std::string netns_name(int pid, int network, int host) {
  return "fw" + std::to_string(pid) + "n" + std::to_string(network) + "h" + std::to_string(host);
}

bool parse_netns_name(const std::string& name, int& pid, int& network, int& host) {
  size_t pos = 0;
  if (name.compare(0, 2, "fw") != 0) return false;
  pos = 2;
  if (!read_int(name, pos, pid) || pos >= name.size() || name[pos++] != 'n') return false;
  if (!read_int(name, pos, network) || pos >= name.size() || name[pos++] != 'h') return false;
  if (!read_int(name, pos, host)) return false;
  return pos == name.size() && pid > 0;
}

bool netns_exists(const std::string& name) {
  return ::access(("/run/netns/" + name).c_str(), F_OK) == 0;
}

std::vector<std::string> list_netns() {
  std::vector<std::string> names;
  DIR* dir = ::opendir("/run/netns");
  if (!dir) return names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(dir);
  return names;
}

bool remove_netns(const std::string& name, int grace_ms) {
  if (!netns_exists(name)) return true;
  std::vector<pid_t> pids = pids_in(name);
  if (!pids.empty()) {
    for (pid_t p : pids) ::kill(p, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
    while (!pids.empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      pids = pids_in(name);
    }
    for (pid_t p : pids) ::kill(p, SIGKILL);
  }
  return run_command({"ip", "netns", "del", name}).status == 0 || !netns_exists(name);
}

std::vector<std::string> remove_stale_netns() {
  std::vector<std::string> removed;
  for (const std::string& name : list_netns()) {
    int pid = 0, network = 0, host = 0;
    if (!parse_netns_name(name, pid, network, host)) continue;
    if (process_alive(pid)) continue;
    if (remove_netns(name, 200)) removed.push_back(name);
  }
  return removed;
}

}  // namespace ferry::wan
