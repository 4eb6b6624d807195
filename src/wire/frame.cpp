#include "wire/frame.h"

#include <string>
#include <vector>

#include "wire/byte_codec.h"

namespace ferry::wire {

std::array<uint8_t, kFrameHeaderBytes> encode_frame_header(const FrameHeader& header) {
  std::vector<uint8_t> bytes;
  bytes.reserve(kFrameHeaderBytes);
  ByteWriter w(bytes);
  w(kFrameMagic);
  w(header.version);
  w(header.type);
  w(header.length);
  std::array<uint8_t, kFrameHeaderBytes> out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return out;
}

Status decode_frame_header(std::span<const uint8_t, kFrameHeaderBytes> bytes, uint32_t max_payload,
                           FrameHeader& out) {
  ByteReader r(bytes);
  uint32_t magic = 0;
  r(magic);
  r(out.version);
  r(out.type);
  r(out.length);
  if (magic != kFrameMagic)
    return Status::failure(Errc::protocol, "not a ferry frame (bad magic)");
  if (out.version != kProtocolVersion)
    return Status::failure(Errc::protocol, "unsupported protocol version " +
                                               std::to_string(out.version) + " (this build speaks " +
                                               std::to_string(kProtocolVersion) + ")");
  if (out.length > max_payload)
    return Status::failure(Errc::protocol, "frame of " + std::to_string(out.length) +
                                               " bytes exceeds the limit of " +
                                               std::to_string(max_payload));
  return Status::success();
}

}  // namespace ferry::wire
