// TCP/IPv4 segmentation offload frames as the TUN devices hand them to the forwarder.
//
// With IFF_VNET_HDR and TUNSETOFFLOAD(CSUM|TSO4), a host's stack gives the forwarder one
// frame of up to 64 KiB (a virtio_net_hdr, then IPv4 + TCP headers, then payload that stands
// for `segments` wire packets of gso_size bytes each) instead of ~44 MTU-sized packets, and
// the destination's stack takes the frame back whole, as a NIC with GRO would. That is 1
// read, 1 write and 1 receiver wake-up where there were 44, which is what lets one forwarder
// thread carry several hosts at 200 Mbit/s on two cores (README.md has the figures).
//
// Loss stays per wire packet: the forwarder draws once per segment, and when some segments
// of a frame are lost it rebuilds each run of kept segments as its own frame (split_run()),
// exactly the packets a segmenting NIC would have put on the wire, minus the lost ones.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::wan {

// struct virtio_net_hdr (linux/virtio_net.h, which C++ cannot include: it has a member named
// `class`). Fields in the host's byte order, as a TUN device without TUNSETVNETBE uses.
struct VnetHdr {
  uint8_t flags;
  uint8_t gso_type;
  uint16_t hdr_len;
  uint16_t gso_size;
  uint16_t csum_start;
  uint16_t csum_offset;
};
static_assert(sizeof(VnetHdr) == 10);
inline constexpr size_t kVnetHdrSize = sizeof(VnetHdr);
inline constexpr uint8_t kVnetFlagNeedsCsum = 1;  // VIRTIO_NET_HDR_F_NEEDS_CSUM
inline constexpr uint8_t kVnetGsoNone = 0;        // VIRTIO_NET_HDR_GSO_NONE
inline constexpr uint8_t kVnetGsoTcpV4 = 1;       // VIRTIO_NET_HDR_GSO_TCPV4
inline constexpr uint8_t kVnetGsoEcn = 0x80;      // VIRTIO_NET_HDR_GSO_ECN

struct TcpGsoFrame {
  size_t ip_offset = kVnetHdrSize;
  size_t headers = 0;   // IPv4 + TCP header bytes
  size_t payload = 0;   // TCP payload bytes
  size_t mss = 0;       // gso_size
  size_t segments = 1;  // wire packets this frame stands for
};

// Fills `out` for a frame [virtio_net_hdr | IPv4 | TCP | payload] of `len` bytes. Returns
// false when the frame is not a well-formed TCPv4 GSO frame (the caller then treats it as
// one packet).
bool parse_tcp_gso(const std::byte* frame, size_t len, TcpGsoFrame& out);

// Writes segments [first, last) of `frame` as one frame into `out` (room for the original
// length is enough) and returns its length. The result is a GSO frame when it holds more
// than one segment, a plain one otherwise; IPv4 length, id and header checksum, TCP sequence
// number and flags (CWR only on the first segment, PSH/FIN only on the last) are those the
// kernel's own segmentation would give, and the TCP checksum is left to the receiver
// (NEEDS_CSUM with the pseudo-header sum), as the original frame did.
size_t split_run(const std::byte* frame, const TcpGsoFrame& g, size_t first, size_t last, std::byte* out);

}  // namespace ferry::wan
