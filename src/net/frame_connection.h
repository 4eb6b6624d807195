// A control connection: whole wire::Messages in, whole messages out, over any
// Stream. It reads continuously, validates every frame header before it
// allocates, and closes on the first malformed frame. It keeps itself alive:
// optional heartbeats out, and a receive deadline in (silence closes it).
//
// State machine: open -> closing (flushing a last message) -> closed; it only
// moves forward and remembers the first reason it closed. on_closed runs once.
//
// Threading: every public call is thread-safe (posted to the stream's strand);
// handlers run on that strand.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include <asio/steady_timer.hpp>

#include "core/error.h"
#include "net/stream.h"
#include "wire/frame.h"
#include "wire/messages.h"

namespace ferry::net {

class FrameConnection : public std::enable_shared_from_this<FrameConnection> {
 public:
  struct Handlers {
    // Heartbeats are consumed here, not delivered. A std::bad_alloc thrown
    // here closes this connection (Errc::system); other exceptions propagate
    // to the io_context's runner.
    std::function<void(wire::Message)> on_message;
    std::function<void(const Status&)> on_closed;
  };
  using Clock = std::chrono::steady_clock;

  static std::shared_ptr<FrameConnection> create(std::shared_ptr<Stream> stream,
                                                 uint32_t max_payload = wire::kMaxControlPayload);

  void start(Handlers handlers);
  void send(const wire::Message& message);
  // Sends `last` (if given), then closes with `reason`.
  void close(Status reason, std::optional<wire::Message> last = std::nullopt);
  // Close when nothing at all arrives for `timeout` (zero: never), after
  // sending `on_silence` if given: a peer that was only stopped (SIGSTOP, a
  // VM paused) reads it when it resumes, and learns why it was dropped
  // instead of taking the closed socket for a dead master. The last frame
  // gets kLastFrameGrace to leave; past it the connection closes anyway.
  void set_receive_timeout(std::chrono::milliseconds timeout, std::optional<wire::Message> on_silence = std::nullopt);
  static constexpr std::chrono::milliseconds kLastFrameGrace{1000};
  // After this process itself did not run for a while, how long the frames
  // that arrived meanwhile get to be read before a silence is judged.
  static constexpr std::chrono::milliseconds kResumeGrace{100};
  // Send a heartbeat every `interval` (zero: never).
  void set_heartbeat(std::chrono::milliseconds interval);
  // Close `within` from now, whatever arrives meanwhile (zero: cancels it).
  // Unlike the receive timeout, frames do not push it back: it bounds a
  // handshake, which a stranger could otherwise keep open with heartbeats.
  void set_deadline(std::chrono::milliseconds within);
  // The largest frame payload accepted from now on (frames are checked before allocation).
  void set_max_payload(uint32_t max_payload);
  std::string remote_host() const { return remote_host_; }

 private:
  enum class State { open, closing, closed };

  FrameConnection(std::shared_ptr<Stream> stream, uint32_t max_payload);
  void read_more();
  // Delivers every whole frame in the inbox and keeps the rest at its front;
  // may throw std::bad_alloc, which closes this connection only.
  void take_frames();
  void deliver(uint16_t type, std::span<const uint8_t> payload);
  void enqueue(std::vector<uint8_t> frame);
  void write_next();
  // The far end no longer takes writes, but what it sent before it went (a
  // kick that says why) may still wait to be read: reads go on for
  // kResumeGrace (they end sooner at its end of stream), then it closes with `why`.
  void write_failed(Status why);
  void finish(Status reason);
  // `after` zero: the regular check interval.
  void arm_receive_timer(std::chrono::milliseconds after = std::chrono::milliseconds(0));
  void arm_heartbeat_timer();
  void arm_deadline_timer(std::chrono::milliseconds within, std::string what);

  std::shared_ptr<Stream> stream_;
  const std::string remote_host_;
  // All below: only on the strand.
  uint32_t max_payload_;
  Handlers handlers_;
  State state_ = State::open;
  Status close_reason_;
  std::vector<uint8_t> inbox_;  // bytes read, not yet delivered: inbox_[0, inbox_used_)
  size_t inbox_used_ = 0;
  std::deque<std::vector<uint8_t>> queue_;
  bool writing_ = false;
  bool writes_failed_ = false;  // see write_failed()
  asio::steady_timer receive_timer_;
  std::chrono::milliseconds receive_timeout_{0};
  std::vector<uint8_t> silence_frame_;  // sent before a close for silence; empty: none
  Clock::time_point last_receive_ = Clock::now();
  asio::steady_timer heartbeat_timer_;
  std::chrono::milliseconds heartbeat_interval_{0};
  asio::steady_timer deadline_timer_;
};

}  // namespace ferry::net
