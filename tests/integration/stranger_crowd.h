// Strangers for the exhaustion tests: plain TCP connections from a chosen
// loopback source address (127.0.0.2, ...: the kernel routes all of
// 127.0.0.0/8 to lo), so a listener's per-source caps can tell the attacker
// from the run's own peers on 127.0.0.1. Each may send some bytes and then
// holds its connection open, as an idle or stalled attacker would.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ferry::test {

// Tests that hold thousands of sockets need more than a distro's soft 1024.
inline void raise_own_fd_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// A loopback port nobody listens on right now (the kernel's pick, released again).
inline uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A connection from `source` to 127.0.0.1:port, or -1 if it did not connect within `timeout`.
inline int connect_from(const char* source, uint16_t port, std::chrono::milliseconds timeout) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0;
  if (ok && ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    pollfd p{fd, POLLOUT, 0};
    int error = 0;
    socklen_t len = sizeof error;
    ok = errno == EINPROGRESS && ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 &&
         ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
  }
  if (!ok) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class StrangerCrowd {
 public:
  StrangerCrowd() = default;
  StrangerCrowd(const StrangerCrowd&) = delete;
  StrangerCrowd& operator=(const StrangerCrowd&) = delete;
  ~StrangerCrowd() { disperse(); }

  // Opens `count` connections from `source`, each sending `first` (may be empty). Returns how many connected.
  size_t arrive(size_t count, const char* source, uint16_t port, const std::vector<uint8_t>& first = {}) {
    size_t connected = 0;
    for (size_t i = 0; i < count; ++i) {
      int fd = connect_from(source, port, std::chrono::milliseconds(2000));
      if (fd < 0) continue;
      ++connected;
      if (!first.empty()) (void)!::send(fd, first.data(), first.size(), MSG_NOSIGNAL);
      fds_.push_back(fd);
    }
    return connected;
  }

  // Drops the connections the far side has closed, then opens new ones until
  // `target` are open again (or `target` attempts fail): an attacker who
  // keeps a listener full rather than filling it once.
  void top_up(size_t target, const char* source, uint16_t port, const std::vector<uint8_t>& first = {}) {
    std::erase_if(fds_, [](int fd) {
      pollfd p{fd, POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 0) return false;
      ::close(fd);
      return true;
    });
    if (fds_.size() < target) arrive(target - fds_.size(), source, port, first);
  }

  // How many the far side still holds open (not closed or reset by it).
  size_t still_open() const {
    size_t open = 0;
    for (int fd : fds_) {
      pollfd p{fd, POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 0) ++open;
    }
    return open;
  }

  void disperse() {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  }

 private:
  std::vector<int> fds_;
};

// Peak resident memory of a process (VmHWM), in bytes; 0 if unknown.
inline uint64_t peak_rss_bytes(int pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  return 0;
}

// Descriptors a process holds right now.
inline size_t open_fds(int pid) {
  std::error_code ec;
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

}  // namespace ferry::test
