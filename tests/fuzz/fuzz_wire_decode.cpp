// libFuzzer target: every decoder of wire/ on arbitrary bytes. Decoding must
// never crash, read out of bounds or allocate past a limit; and whatever
// decodes must encode back to the very same bytes (the codec is canonical:
// fixed-width little-endian integers, length-prefixed strings and vectors, no
// trailing bytes), so an encoder/decoder disagreement is a finding too.
//
// Input: byte 0 picks the decoder (mod 4), the rest feeds it:
//   0  a stream of frames: 12-byte header, then its payload, repeated
//   1  one payload: u16 message type (little-endian), then the payload
//   2  one chunk header (24 bytes)
//   3  one fetch frame: byte (even: request, 24 bytes; odd: response, 40 bytes)
#include <array>
#include <cstring>
#include <vector>

#include "core/log.h"
#include "fuzz_input.h"
#include "wire/chunk_header.h"
#include "wire/fetch_frames.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry;
using ferry::fuzz::FuzzInput;

namespace {

// An exact-size copy, so that reading one byte past it is an ASan report.
std::vector<uint8_t> exact(std::span<const uint8_t> bytes) { return {bytes.begin(), bytes.end()}; }

void decode_and_reencode(uint16_t type, std::span<const uint8_t> payload_in) {
  std::vector<uint8_t> payload = exact(payload_in);
  wire::DecodedMessage decoded = wire::decode_message(type, payload);
  FERRY_FUZZ_CHECK(decoded.status.ok() == decoded.message.has_value(), "status and message disagree");
  if (!decoded.status.ok()) {
    FERRY_FUZZ_CHECK(decoded.status.code == Errc::protocol, "a decode failure that is not Errc::protocol");
    return;
  }
  FERRY_FUZZ_CHECK(static_cast<uint16_t>(wire::message_type(*decoded.message)) == type, "decoded to another type");
  std::vector<uint8_t> frame = wire::encode_message(*decoded.message);
  FERRY_FUZZ_CHECK(frame.size() == wire::kFrameHeaderBytes + payload.size(), "re-encoding changed the length");
  FERRY_FUZZ_CHECK(payload.empty() || std::memcmp(frame.data() + wire::kFrameHeaderBytes, payload.data(), payload.size()) == 0,
                   "re-encoding changed the bytes");
  wire::FrameHeader header;
  std::span<const uint8_t, wire::kFrameHeaderBytes> head(frame.data(), wire::kFrameHeaderBytes);
  FERRY_FUZZ_CHECK(wire::decode_frame_header(head, wire::kMaxControlPayload, header).ok(), "own header refused");
  FERRY_FUZZ_CHECK(header.type == type && header.length == payload.size(), "own header wrong");
}

void frame_stream(FuzzInput& in) {
  // A small limit as well as the real one: the bound must hold whatever it is.
  uint32_t limit = (in.u8() & 1) ? wire::kMaxControlPayload : 4096;
  while (in.remaining() >= wire::kFrameHeaderBytes) {
    std::vector<uint8_t> head_bytes = exact(in.bytes(wire::kFrameHeaderBytes));
    std::span<const uint8_t, wire::kFrameHeaderBytes> head(head_bytes.data(), wire::kFrameHeaderBytes);
    wire::FrameHeader header;
    Status st = wire::decode_frame_header(head, limit, header);
    if (!st.ok()) {
      FERRY_FUZZ_CHECK(st.code == Errc::protocol, "a header failure that is not Errc::protocol");
      return;
    }
    FERRY_FUZZ_CHECK(header.length <= limit, "a header past the limit was accepted");
    if (in.remaining() < header.length) return;  // a torn frame: the connection would wait for more
    decode_and_reencode(header.type, in.bytes(header.length));
  }
}

void chunk_header(FuzzInput& in) {
  std::vector<uint8_t> bytes = exact(in.bytes(wire::kChunkHeaderBytes));
  if (bytes.size() < wire::kChunkHeaderBytes) return;
  wire::ChunkHeader h;
  if (!wire::decode_chunk_header(bytes.data(), h)) return;
  auto again = wire::encode_chunk_header(h);
  FERRY_FUZZ_CHECK(std::memcmp(again.data(), bytes.data(), bytes.size()) == 0, "chunk header not canonical");
}

void fetch_frame(FuzzInput& in) {
  bool response = in.u8() & 1;
  size_t size = response ? wire::kFetchResponseBytes : wire::kFetchRequestBytes;
  std::vector<uint8_t> bytes = exact(in.bytes(size));
  if (bytes.size() < size) return;
  if (response) {
    wire::FetchResponse r;
    if (!wire::decode_fetch_response(bytes.data(), r)) return;
    auto again = wire::encode_fetch_response(r);
    // Its last 4 bytes are reserved: ignored by the decoder, written as zero.
    FERRY_FUZZ_CHECK(std::memcmp(again.data(), bytes.data(), size - 4) == 0, "fetch response not canonical");
  } else {
    wire::FetchRequest r;
    if (!wire::decode_fetch_request(bytes.data(), r)) return;
    auto again = wire::encode_fetch_request(r);
    FERRY_FUZZ_CHECK(std::memcmp(again.data(), bytes.data(), size) == 0, "fetch request not canonical");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  switch (in.u8() % 4) {
    case 0:
      frame_stream(in);
      break;
    case 1: {
      uint16_t type = in.u16();
      decode_and_reencode(type, in.rest());
      break;
    }
    case 2:
      chunk_header(in);
      break;
    case 3:
      fetch_frame(in);
      break;
  }
  return 0;
}
