// Opening a TUN device inside another network namespace, from this process.
//
// setns(CLONE_NEWNET) moves only the calling thread, and a TUN device belongs to the namespace
// its creator was in when it called TUNSETIFF; the fd itself works from anywhere afterwards.
// So one process can hold the TUN of every emulated host. The device lives exactly as long as
// its fd (not persistent): if the forwarder dies, the hosts' links vanish with it.
#pragma once

#include <string>

namespace ferry::wan {

// Creates TUN device `ifname` (IFF_TUN | IFF_NO_PI | IFF_VNET_HDR) inside `netns_name` and
// returns its non-blocking, close-on-exec fd. Every frame read or written starts with a
// virtio_net_hdr (tcp_gso.h). With `offload`, the device takes and gives TCPv4 GSO frames and
// partial checksums (TUN_F_CSUM | TUN_F_TSO4); without, the header is always empty and every
// frame is one MTU-sized packet. Also switches IPv6 off on the device, so the only traffic
// the forwarder sees is the IPv4 the hosts send (WanNetwork switches it back on for a host
// the topology gives IPv6). Throws std::system_error.
int open_tun_in_netns(const std::string& netns_name, const std::string& ifname, bool offload);

}  // namespace ferry::wan
