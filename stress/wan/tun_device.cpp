#include "tun_device.h"

#include "netns.h"
#include "tcp_gso.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace ferry::wan {
namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

int open_tun_in_netns(const std::string& netns_name, const std::string& ifname, bool offload) {
  if (ifname.size() >= IFNAMSIZ) throw std::system_error(EINVAL, std::generic_category(), "TUN name too long");
  ScopedNetns inside(netns_name);
  const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_errno("open /dev/net/tun");
  struct ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
  std::memcpy(ifr.ifr_name, ifname.c_str(), ifname.size());
  if (::ioctl(fd, TUNSETIFF, &ifr) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw_errno("TUNSETIFF " + ifname + " in " + netns_name);
  }
  const int vnet_size = static_cast<int>(kVnetHdrSize);
  const unsigned offloads = offload ? (TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO_ECN) : 0u;
  if (::ioctl(fd, TUNSETVNETHDRSZ, &vnet_size) != 0 || ::ioctl(fd, TUNSETOFFLOAD, offloads) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    throw_errno("TUN offload setup of " + ifname + " in " + netns_name);
  }
  // /proc/sys/net resolves against the opener's namespace, which is the host's right now.
  // Best effort: a kernel without IPv6 has no such file, and that is fine.
  const std::string v6 = "/proc/sys/net/ipv6/conf/" + ifname + "/disable_ipv6";
  const int sfd = ::open(v6.c_str(), O_WRONLY | O_CLOEXEC);
  if (sfd >= 0) {
    [[maybe_unused]] ssize_t n = ::write(sfd, "1", 1);
    ::close(sfd);
  }
  return fd;
}

}  // namespace ferry::wan
