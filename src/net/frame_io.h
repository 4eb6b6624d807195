// One control message read or written on a raw stream, for handshakes that
// precede a stream's real protocol (p2p links switch to raw chunks after).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "core/error.h"
#include "net/stream.h"
#include "wire/messages.h"

namespace ferry::net {

using MessageHandler = std::function<void(Status, std::optional<wire::Message>)>;

// Reads exactly one frame within `timeout` (Errc::timeout after; the stream is
// then closed). Call on the stream's strand; `done` runs there, once.
void read_one_message(std::shared_ptr<Stream> stream, std::chrono::milliseconds timeout,
                      uint32_t max_payload, MessageHandler done);

// Writes one frame. Call on the stream's strand; `done` runs there, once.
void write_one_message(std::shared_ptr<Stream> stream, const wire::Message& message,
                       std::function<void(Status)> done);

}  // namespace ferry::net
