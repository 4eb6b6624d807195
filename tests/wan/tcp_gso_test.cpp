#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "tcp_gso.h"

using namespace ferry::wan;

namespace {

uint16_t get16(const std::vector<std::byte>& f, size_t at) {
  return static_cast<uint16_t>((uint16_t(f[at]) << 8) | uint16_t(f[at + 1]));
}
void put16(std::vector<std::byte>& f, size_t at, uint16_t v) {
  f[at] = std::byte(v >> 8);
  f[at + 1] = std::byte(v & 0xff);
}
uint32_t sum16(const std::byte* p, size_t n, uint32_t acc = 0) {
  for (size_t i = 0; i + 1 < n; i += 2) acc += static_cast<uint32_t>((uint16_t(p[i]) << 8) | uint16_t(p[i + 1]));
  if (n & 1) acc += uint32_t(p[n - 1]) << 8;
  return acc;
}
uint16_t fold(uint32_t acc) {
  while (acc >> 16) acc = (acc & 0xffff) + (acc >> 16);
  return static_cast<uint16_t>(acc);
}

constexpr size_t kIp = kVnetHdrSize;
constexpr size_t kTcp = kIp + 20;
constexpr size_t kData = kTcp + 20;

// A TCPv4 GSO frame as a TUN with TSO hands it over: 3500 payload bytes, MSS 1000.
std::vector<std::byte> make_frame(size_t payload, uint8_t tcp_flags) {
  std::vector<std::byte> f(kData + payload);
  VnetHdr vh{kVnetFlagNeedsCsum, kVnetGsoTcpV4, 40, 1000, 20, 16};
  std::memcpy(f.data(), &vh, sizeof vh);
  f[kIp] = std::byte{0x45};
  put16(f, kIp + 2, static_cast<uint16_t>(40 + payload));
  put16(f, kIp + 4, 100);  // id
  f[kIp + 8] = std::byte{64};
  f[kIp + 9] = std::byte{6};
  const uint8_t src[4] = {10, 77, 0, 1}, dst[4] = {10, 77, 0, 2};
  for (int i = 0; i < 4; ++i) {
    f[kIp + 12 + i] = std::byte{src[i]};
    f[kIp + 16 + i] = std::byte{dst[i]};
  }
  put16(f, kIp + 10, static_cast<uint16_t>(~fold(sum16(f.data() + kIp, 20))));
  put16(f, kTcp, 40000);
  put16(f, kTcp + 2, 5001);
  put16(f, kTcp + 4, 0);
  put16(f, kTcp + 6, 1000);  // seq = 1000
  f[kTcp + 12] = std::byte{0x50};
  f[kTcp + 13] = std::byte{tcp_flags};
  for (size_t i = 0; i < payload; ++i) f[kData + i] = std::byte(static_cast<uint8_t>(i * 7 + 3));
  return f;
}

// Completes a NEEDS_CSUM checksum as a NIC would and checks it against the full TCP checksum.
bool tcp_checksum_completes(std::vector<std::byte> f, size_t len) {
  const size_t tcp_len = len - kTcp;
  const uint16_t c = static_cast<uint16_t>(~fold(sum16(f.data() + kTcp, tcp_len)));
  put16(f, kTcp + 16, c);
  uint32_t acc = sum16(f.data() + kIp + 12, 8) + 6 + static_cast<uint32_t>(tcp_len);
  return fold(sum16(f.data() + kTcp, tcp_len, acc)) == 0xffff;
}

}  // namespace

TEST_CASE("GSO frame parses into its wire segments", "[wan][gso]") {
  const auto f = make_frame(3500, 0x18);
  TcpGsoFrame g;
  REQUIRE(parse_tcp_gso(f.data(), f.size(), g));
  CHECK(g.headers == 40);
  CHECK(g.payload == 3500);
  CHECK(g.mss == 1000);
  CHECK(g.segments == 4);

  auto plain = f;
  plain[1] = std::byte{kVnetGsoNone};
  CHECK_FALSE(parse_tcp_gso(plain.data(), plain.size(), g));
  CHECK_FALSE(parse_tcp_gso(f.data(), 30, g));
}

TEST_CASE("a run of kept segments is the packets kernel segmentation would send", "[wan][gso]") {
  const auto f = make_frame(3500, 0x80 | 0x18 | 0x01);  // CWR, ACK, PSH, FIN
  TcpGsoFrame g;
  REQUIRE(parse_tcp_gso(f.data(), f.size(), g));
  std::vector<std::byte> out(f.size());

  SECTION("middle run: segments 1 and 2") {
    const size_t n = split_run(f.data(), g, 1, 3, out.data());
    REQUIRE(n == kData + 2000);
    VnetHdr vh;
    std::memcpy(&vh, out.data(), sizeof vh);
    CHECK(vh.gso_type == kVnetGsoTcpV4);
    CHECK(vh.gso_size == 1000);
    CHECK(vh.flags == kVnetFlagNeedsCsum);
    CHECK(get16(out, kIp + 2) == 2040);
    CHECK(get16(out, kIp + 4) == 101);
    CHECK(fold(sum16(out.data() + kIp, 20)) == 0xffff);  // IPv4 header checksum valid
    CHECK(get16(out, kTcp + 6) == 2000);                 // seq + 1000
    CHECK(uint8_t(out[kTcp + 13]) == 0x10);              // CWR, PSH, FIN gone; ACK stays
    CHECK(std::memcmp(out.data() + kData, f.data() + kData + 1000, 2000) == 0);
    CHECK(tcp_checksum_completes(out, n));
  }
  SECTION("last segment alone: a plain packet with the closing flags") {
    const size_t n = split_run(f.data(), g, 3, 4, out.data());
    REQUIRE(n == kData + 500);
    VnetHdr vh;
    std::memcpy(&vh, out.data(), sizeof vh);
    CHECK(vh.gso_type == kVnetGsoNone);
    CHECK(get16(out, kIp + 4) == 103);
    CHECK(get16(out, kTcp + 6) == 4000);
    CHECK(uint8_t(out[kTcp + 13]) == (0x18 | 0x01));
    CHECK(fold(sum16(out.data() + kIp, 20)) == 0xffff);
    CHECK(tcp_checksum_completes(out, n));
  }
  SECTION("first segment keeps CWR") {
    split_run(f.data(), g, 0, 1, out.data());
    CHECK(uint8_t(out[kTcp + 13]) == (0x80 | 0x10));
  }
}
