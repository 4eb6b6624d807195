#include "net/frame_io.h"

#include <asio/steady_timer.hpp>

#include "core/duration_text.h"
#include "wire/frame.h"

namespace ferry::net {
namespace {

struct OneRead {
  std::shared_ptr<Stream> stream;
  asio::steady_timer timer;
  MessageHandler done;
  uint32_t max_payload;
  std::array<uint8_t, wire::kFrameHeaderBytes> header_bytes{};
  wire::FrameHeader header;
  std::vector<uint8_t> payload;
  bool finished = false;

  OneRead(std::shared_ptr<Stream> s, MessageHandler d, uint32_t max)
      : stream(std::move(s)), timer(stream->executor()), done(std::move(d)), max_payload(max) {}

  void finish(Status st, std::optional<wire::Message> message) {
    if (finished) return;
    finished = true;
    timer.cancel();
    if (!st.ok()) stream->close();
    done(std::move(st), std::move(message));
  }
};

}  // namespace

void read_one_message(std::shared_ptr<Stream> stream, std::chrono::milliseconds timeout,
                      uint32_t max_payload, MessageHandler done) {
  auto op = std::make_shared<OneRead>(std::move(stream), std::move(done), max_payload);
  op->timer.expires_after(timeout);
  op->timer.async_wait([op, timeout](std::error_code ec) {
    if (!ec)
      op->finish(Status::failure(Errc::timeout, "no handshake within " + ms(timeout)),
                 std::nullopt);
  });
  op->stream->read_exact(asio::buffer(op->header_bytes), [op](std::error_code ec, size_t) {
    if (op->finished) return;
    if (ec) return op->finish(Status::failure(Errc::peer_lost, "closed during handshake: " + ec.message()), std::nullopt);
    Status st = wire::decode_frame_header(op->header_bytes, op->max_payload, op->header);
    if (!st.ok()) return op->finish(st, std::nullopt);
    op->payload.resize(op->header.length);
    op->stream->read_exact(asio::buffer(op->payload), [op](std::error_code ec2, size_t) {
      if (op->finished) return;
      if (ec2)
        return op->finish(Status::failure(Errc::peer_lost, "closed during handshake: " + ec2.message()),
                          std::nullopt);
      auto decoded = wire::decode_message(op->header.type, op->payload);
      op->finish(decoded.status, std::move(decoded.message));
    });
  });
}

void write_one_message(std::shared_ptr<Stream> stream, const wire::Message& message,
                       std::function<void(Status)> done) {
  auto frame = std::make_shared<std::vector<uint8_t>>(wire::encode_message(message));
  std::array<asio::const_buffer, 1> buffers{asio::buffer(*frame)};
  stream->write_all(buffers, [frame, stream, done = std::move(done)](std::error_code ec, size_t) {
    done(ec ? Status::failure(Errc::peer_lost, "closed during handshake: " + ec.message()) : Status::success());
  });
}

}  // namespace ferry::net
