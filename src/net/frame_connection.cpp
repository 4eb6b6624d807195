#include "net/frame_connection.h"

#include <cstring>
#include <new>

#include <asio/dispatch.hpp>
#include <asio/post.hpp>

#include "core/duration_text.h"

namespace ferry::net {

std::shared_ptr<FrameConnection> FrameConnection::create(std::shared_ptr<Stream> stream,
                                                         uint32_t max_payload) {
  return std::shared_ptr<FrameConnection>(new FrameConnection(std::move(stream), max_payload));
}

FrameConnection::FrameConnection(std::shared_ptr<Stream> stream, uint32_t max_payload)
    : stream_(std::move(stream)),
      remote_host_(stream_->remote_host()),
      max_payload_(max_payload),
      receive_timer_(stream_->executor()),
      heartbeat_timer_(stream_->executor()),
      deadline_timer_(stream_->executor()) {}

void FrameConnection::start(Handlers handlers) {
  asio::dispatch(stream_->executor(), [self = shared_from_this(), handlers = std::move(handlers)] {
    self->handlers_ = handlers;
    self->last_receive_ = Clock::now();
    self->read_more();
  });
}

void FrameConnection::send(const wire::Message& message) {
  asio::post(stream_->executor(), [self = shared_from_this(), frame = wire::encode_message(message)] {
    if (self->state_ == State::open) self->enqueue(frame);
  });
}

void FrameConnection::close(Status reason, std::optional<wire::Message> last) {
  std::vector<uint8_t> frame;
  if (last) frame = wire::encode_message(*last);
  asio::post(stream_->executor(), [self = shared_from_this(), reason = std::move(reason),
                                   frame = std::move(frame)]() mutable {
    if (self->state_ != State::open) return;
    if (frame.empty()) return self->finish(std::move(reason));
    self->state_ = State::closing;
    self->close_reason_ = std::move(reason);
    self->enqueue(std::move(frame));
  });
}

void FrameConnection::set_receive_timeout(std::chrono::milliseconds timeout, std::optional<wire::Message> on_silence) {
  std::vector<uint8_t> frame;
  if (on_silence) frame = wire::encode_message(*on_silence);
  asio::post(stream_->executor(), [self = shared_from_this(), timeout, frame = std::move(frame)]() mutable {
    self->receive_timeout_ = timeout;
    self->silence_frame_ = std::move(frame);
    self->last_receive_ = Clock::now();
    self->arm_receive_timer();
  });
}

void FrameConnection::set_heartbeat(std::chrono::milliseconds interval) {
  asio::post(stream_->executor(), [self = shared_from_this(), interval] {
    self->heartbeat_interval_ = interval;
    self->arm_heartbeat_timer();
  });
}

void FrameConnection::set_deadline(std::chrono::milliseconds within) {
  asio::post(stream_->executor(), [self = shared_from_this(), within] { self->arm_deadline_timer(within, "no handshake"); });
}

void FrameConnection::set_max_payload(uint32_t max_payload) {
  asio::post(stream_->executor(), [self = shared_from_this(), max_payload] { self->max_payload_ = max_payload; });
}

namespace {
// One connection's frame (or what its handler built from it) did not fit in
// memory: that connection goes, the process and its other connections stay.
Status out_of_memory() { return Status::failure(Errc::system, "out of memory while serving this connection"); }

// What one read asks of the stream. Frames are read in bursts, not header then
// payload: a master's round brings each connection a begin and an end, and two
// reads (and the try that finds nothing more) per frame were a third of its
// syscalls (strace, 64 fake peers). 4 KiB: what a stranger may make us hold
// before its hello anyway (wire::kMaxHandshakePayload); a larger frame grows
// the inbox to its size once its header passed the payload limit.
constexpr size_t kInboxBytes = 4 * 1024;
}  // namespace

void FrameConnection::read_more() {
  if (inbox_.size() < kInboxBytes) inbox_.resize(kInboxBytes);
  auto room = asio::buffer(inbox_.data() + inbox_used_, inbox_.size() - inbox_used_);
  stream_->read_some(room, [self = shared_from_this()](std::error_code ec, size_t n) {
    if (self->state_ == State::closed) return;
    if (ec) return self->finish(Status::failure(Errc::peer_lost, "connection closed: " + ec.message()));
    self->last_receive_ = Clock::now();
    self->inbox_used_ += n;
    try {
      self->take_frames();
    } catch (const std::bad_alloc&) {
      return self->finish(out_of_memory());
    }
    if (self->state_ != State::closed) self->read_more();
  });
}

void FrameConnection::take_frames() {
  size_t at = 0;
  size_t next_frame = 0;  // bytes of the incomplete frame at `at`, once its header is in
  while (state_ != State::closed && inbox_used_ - at >= wire::kFrameHeaderBytes) {
    wire::FrameHeader header;
    std::span<const uint8_t, wire::kFrameHeaderBytes> header_bytes(inbox_.data() + at, wire::kFrameHeaderBytes);
    if (Status st = wire::decode_frame_header(header_bytes, max_payload_, header); !st.ok()) return finish(st);
    const size_t whole = wire::kFrameHeaderBytes + header.length;
    if (inbox_used_ - at < whole) {
      next_frame = whole;
      break;
    }
    deliver(header.type, std::span<const uint8_t>(inbox_.data() + at + wire::kFrameHeaderBytes, header.length));
    at += whole;
  }
  if (state_ == State::closed) return;
  std::memmove(inbox_.data(), inbox_.data() + at, inbox_used_ - at);
  inbox_used_ -= at;
  if (next_frame > inbox_.size()) inbox_.resize(next_frame);
}

void FrameConnection::deliver(uint16_t type, std::span<const uint8_t> payload) {
  auto decoded = wire::decode_message(type, payload);
  if (!decoded.status.ok()) return finish(decoded.status);
  if (!std::holds_alternative<wire::Heartbeat>(*decoded.message) && state_ == State::open && handlers_.on_message)
    handlers_.on_message(std::move(*decoded.message));
}

void FrameConnection::enqueue(std::vector<uint8_t> frame) {
  if (writes_failed_) return;
  queue_.push_back(std::move(frame));
  if (!writing_) write_next();
}

void FrameConnection::write_next() {
  if (queue_.empty()) {
    writing_ = false;
    if (state_ == State::closing) finish(close_reason_);
    return;
  }
  writing_ = true;
  std::array<asio::const_buffer, 1> buffers{asio::buffer(queue_.front())};
  stream_->write_all(buffers, [self = shared_from_this()](std::error_code ec, size_t) {
    if (self->state_ == State::closed) return;
    if (ec) return self->write_failed(Status::failure(Errc::peer_lost, "connection closed: " + ec.message()));
    self->queue_.pop_front();
    self->write_next();
  });
}

void FrameConnection::write_failed(Status why) {
  if (state_ == State::closing) return finish(std::move(why));  // closing anyway: nothing more to read for
  writes_failed_ = true;
  writing_ = false;
  queue_.clear();
  deadline_timer_.cancel();
  deadline_timer_.expires_after(kResumeGrace);
  deadline_timer_.async_wait([self = shared_from_this(), why = std::move(why)](std::error_code ec) {
    if (!ec) self->finish(why);
  });
}

void FrameConnection::finish(Status reason) {
  if (state_ == State::closed) return;
  if (state_ == State::closing) reason = close_reason_;  // the reason given to close() wins
  state_ = State::closed;
  queue_.clear();
  receive_timer_.cancel();
  heartbeat_timer_.cancel();
  deadline_timer_.cancel();
  stream_->close();
  auto on_closed = std::move(handlers_.on_closed);
  handlers_ = {};  // drop captured owners: breaks cycles between a connection and its user
  if (on_closed) on_closed(reason);
}

void FrameConnection::arm_receive_timer(std::chrono::milliseconds after) {
  if (state_ == State::closed || receive_timeout_.count() == 0) return;
  // Check a few times per deadline instead of re-arming per frame: frames are frequent.
  auto interval = after.count() > 0 ? after : std::max(receive_timeout_ / 4, std::chrono::milliseconds(10));
  receive_timer_.expires_after(interval);
  receive_timer_.async_wait([self = shared_from_this(), armed = receive_timeout_, due = Clock::now() + interval,
                             interval, graced = after.count() > 0](std::error_code ec) {
    if (ec || self->state_ == State::closed || self->receive_timeout_ != armed) return;
    auto now = Clock::now();
    auto silent = now - self->last_receive_;
    if (silent < self->receive_timeout_) return self->arm_receive_timer();
    // The timer itself ran late by more than its interval: this process did
    // not run (stopped, suspended), and what arrived meanwhile (a kick that
    // says why) is read before the silence is judged. Once per silence: a
    // process starved for good must not put its judgement off for ever.
    if (!graced && now - due > interval) return self->arm_receive_timer(kResumeGrace);
    const auto silent_ms = std::chrono::duration_cast<std::chrono::milliseconds>(silent);
    Status why = Status::failure(Errc::timeout, "silent for " + ms(silent_ms));
    if (self->silence_frame_.empty() || self->state_ != State::open) return self->finish(std::move(why));
    self->state_ = State::closing;
    self->close_reason_ = std::move(why);
    self->enqueue(std::move(self->silence_frame_));
    self->arm_deadline_timer(kLastFrameGrace, "the last frame not sent");
  });
}

void FrameConnection::arm_heartbeat_timer() {
  if (state_ == State::closed || heartbeat_interval_.count() == 0) return;
  heartbeat_timer_.expires_after(heartbeat_interval_);
  heartbeat_timer_.async_wait([self = shared_from_this(), armed = heartbeat_interval_](std::error_code ec) {
    if (ec || self->state_ == State::closed || self->heartbeat_interval_ != armed) return;
    if (self->state_ == State::open) self->enqueue(wire::encode_message(wire::Heartbeat{}));
    self->arm_heartbeat_timer();
  });
}

void FrameConnection::arm_deadline_timer(std::chrono::milliseconds within, std::string what) {
  deadline_timer_.cancel();
  if (state_ == State::closed || within.count() == 0) return;
  deadline_timer_.expires_after(within);
  deadline_timer_.async_wait([self = shared_from_this(), within, what = std::move(what)](std::error_code ec) {
    if (ec || self->state_ == State::closed) return;
    self->finish(Status::failure(Errc::timeout, what + " within " + ms(within)));
  });
}

}  // namespace ferry::net
