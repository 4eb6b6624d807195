#include "tcp_gso.h"

#include <algorithm>
#include <cstring>

namespace ferry::wan {
namespace {

uint16_t get16(const std::byte* p) { return static_cast<uint16_t>((uint16_t(p[0]) << 8) | uint16_t(p[1])); }
void put16(std::byte* p, uint16_t v) {
  p[0] = std::byte(v >> 8);
  p[1] = std::byte(v & 0xff);
}
uint32_t get32(const std::byte* p) { return (uint32_t{get16(p)} << 16) | get16(p + 2); }
void put32(std::byte* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}

uint32_t sum16(const std::byte* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += get16(p + i);
  if (n & 1) acc += uint32_t(p[n - 1]) << 8;
  return acc;
}
uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

constexpr uint8_t kTcpFin = 0x01, kTcpPsh = 0x08, kTcpCwr = 0x80;

}  // namespace

bool parse_tcp_gso(const std::byte* frame, size_t len, TcpGsoFrame& out) {
  VnetHdr vh;
  if (len < kVnetHdrSize + 40) return false;
  std::memcpy(&vh, frame, sizeof vh);
  if ((vh.gso_type & ~kVnetGsoEcn) != kVnetGsoTcpV4 || vh.gso_size == 0) return false;
  const std::byte* ip = frame + kVnetHdrSize;
  if ((uint8_t(ip[0]) >> 4) != 4 || uint8_t(ip[9]) != 6) return false;
  const size_t ihl = (uint8_t(ip[0]) & 0x0f) * 4u;
  if (ihl < 20 || kVnetHdrSize + ihl + 20 > len) return false;
  const size_t doff = (uint8_t(ip[ihl + 12]) >> 4) * 4u;
  if (doff < 20 || kVnetHdrSize + ihl + doff > len) return false;
  out.ip_offset = kVnetHdrSize;
  out.headers = ihl + doff;
  out.payload = len - kVnetHdrSize - out.headers;
  out.mss = vh.gso_size;
  out.segments = out.payload == 0 ? 1 : (out.payload + out.mss - 1) / out.mss;
  return true;
}

size_t split_run(const std::byte* frame, const TcpGsoFrame& g, size_t first, size_t last, std::byte* out) {
  const size_t from = first * g.mss;
  const size_t to = std::min(last * g.mss, g.payload);
  const size_t run_payload = to - from;
  const std::byte* ip_in = frame + g.ip_offset;
  std::byte* ip = out + g.ip_offset;
  std::memcpy(out, frame, g.ip_offset + g.headers);
  std::memcpy(ip + g.headers, ip_in + g.headers + from, run_payload);

  const size_t ihl = (uint8_t(ip[0]) & 0x0f) * 4u;
  std::byte* tcp = ip + ihl;
  const size_t tcp_len = g.headers - ihl + run_payload;

  // IPv4: total length, id as the kernel's segmentation numbers them, header checksum.
  put16(ip + 2, static_cast<uint16_t>(g.headers + run_payload));
  put16(ip + 4, static_cast<uint16_t>(get16(ip + 4) + first));
  put16(ip + 10, 0);
  put16(ip + 10, static_cast<uint16_t>(~fold(sum16(ip, ihl))));

  // TCP: sequence number, flags that belong only to the first or the last segment.
  put32(tcp + 4, get32(tcp + 4) + static_cast<uint32_t>(from));
  uint8_t flags = uint8_t(tcp[13]);
  if (first > 0) flags = static_cast<uint8_t>(flags & ~kTcpCwr);
  if (last < g.segments) flags = static_cast<uint8_t>(flags & ~(kTcpFin | kTcpPsh));
  tcp[13] = std::byte(flags);
  // Checksum left to the receiver: the field holds the pseudo-header sum (addresses,
  // protocol, TCP length), which is what CHECKSUM_PARTIAL expects there.
  uint32_t pseudo = sum16(ip + 12, 8);
  pseudo += 6;
  pseudo += static_cast<uint32_t>(tcp_len);
  put16(tcp + 16, fold(pseudo));

  VnetHdr vh;
  std::memcpy(&vh, frame, sizeof vh);
  vh.flags = kVnetFlagNeedsCsum;
  vh.csum_start = static_cast<uint16_t>(ihl);
  vh.csum_offset = 16;
  if (last - first <= 1) {
    vh.gso_type = kVnetGsoNone;
    vh.gso_size = 0;
  }
  vh.hdr_len = static_cast<uint16_t>(g.headers);
  std::memcpy(out, &vh, sizeof vh);
  return g.ip_offset + g.headers + run_payload;
}

}  // namespace ferry::wan
