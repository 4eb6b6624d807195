// Raw frames of a shared-state fetch connection (after fetch_hello /
// link_welcome): the fetcher sends requests, the holder answers each with a
// response header and the (possibly zstd-compressed) bytes. Fixed sizes, no
// allocation; every field is validated by the receiver before it is used.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ferry::wire {

inline constexpr size_t kFetchRequestBytes = 24;
inline constexpr size_t kFetchResponseBytes = 40;
inline constexpr uint32_t kMaxFetchChunk = 16u << 20;
inline constexpr size_t kMaxFetchConnections = 16;  // per fetcher, over all its holders

// The connections a fetcher opens (or waits for) per holder: as many as it asks,
// at most kMaxFetchConnections over all of them, at least one each. The master
// tells a holder that connects itself the same number (SyncPlan::serve_dials).
inline uint32_t fetch_connections_per_holder(uint32_t asked, size_t holders) {
  size_t share = holders == 0 ? kMaxFetchConnections : kMaxFetchConnections / holders;
  size_t n = asked < share ? asked : share;
  return static_cast<uint32_t>(n < 1 ? 1 : n);
}

struct FetchRequest {
  uint32_t tensor = 0;       // position in name order
  uint64_t offset = 0;       // bytes into the tensor
  uint32_t length = 0;       // raw bytes wanted, <= kMaxFetchChunk
  uint32_t compression = 0;  // zstd level the fetcher asks for; 0: none
};

struct FetchResponse {
  uint32_t tensor = 0;
  uint64_t offset = 0;
  uint32_t raw_length = 0;
  uint32_t wire_length = 0;  // bytes that follow
  uint32_t compressed = 0;   // 1: zstd frame, else raw
  uint64_t checksum = 0;     // XXH3-64 of the raw bytes
};

std::array<uint8_t, kFetchRequestBytes> encode_fetch_request(const FetchRequest& r);
bool decode_fetch_request(const uint8_t* bytes, FetchRequest& out);
std::array<uint8_t, kFetchResponseBytes> encode_fetch_response(const FetchResponse& r);
bool decode_fetch_response(const uint8_t* bytes, FetchResponse& out);

}  // namespace ferry::wire
