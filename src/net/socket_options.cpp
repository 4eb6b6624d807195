#include "net/socket_options.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

namespace ferry::net {
namespace {

int set_congestion(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size()));
}

std::string read_proc(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

void apply_socket_options(asio::ip::tcp::socket& socket) {
  std::error_code ignored;  // a socket that refuses an option still works, only slower
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  socket.set_option(asio::socket_base::keep_alive(true), ignored);
}

Status apply_tuning(asio::ip::tcp::socket& socket, const SocketTuning& tuning) {
  if (tuning.congestion_control.empty()) return Status::success();
  if (set_congestion(socket.native_handle(), tuning.congestion_control) != 0)
    return Status::failure(Errc::system, "TCP_CONGESTION " + tuning.congestion_control + ": " + std::strerror(errno));
  return Status::success();
}

Status check_congestion_control(const std::string& name) {
  if (name.empty()) return Status::success();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::failure(Errc::system, std::string("socket: ") + std::strerror(errno));
  int rc = set_congestion(fd, name);
  int err = errno;
  ::close(fd);
  if (rc == 0) return Status::success();
  return Status::failure(Errc::invalid_argument,
                         "congestion control '" + name + "' is not usable here (" + std::strerror(err) +
                             "); available: " + read_proc("/proc/sys/net/ipv4/tcp_available_congestion_control") +
                             "; allowed without privileges: " +
                             read_proc("/proc/sys/net/ipv4/tcp_allowed_congestion_control"));
}

bool set_congestion_control(int fd, const std::string& name) { return set_congestion(fd, name) == 0; }

bool limit_unsent(int fd, uint32_t bytes) {
  int value = static_cast<int>(bytes);
  return ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &value, sizeof value) == 0;
}

bool reset_on_close(int fd) {
  linger value{1, 0};
  return ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &value, sizeof value) == 0;
}

std::string congestion_control_of(int fd) {
  char name[32] = {};
  socklen_t length = sizeof name;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return {};
  return std::string(name, ::strnlen(name, sizeof name));
}

}  // namespace ferry::net
