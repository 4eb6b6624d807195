#include "peer/out_lane.h"

#include <asio/post.hpp>

namespace ferry::peer {

OutLane::OutLane(std::shared_ptr<net::Stream> stream, OnError on_error)
    : stream_(std::move(stream)), on_error_(std::move(on_error)) {}

void OutLane::start() {
  asio::post(stream_->executor(), [self = shared_from_this()] {
    self->stream_->read_exact(asio::buffer(self->probe_), [self](std::error_code ec, size_t) {
      self->fail(Status::failure(Errc::peer_lost,
                                 ec ? "link to the next peer closed: " + ec.message()
                                    : "the next peer sent data on an outgoing lane"));
    });
  });
}

void OutLane::push(const wire::ChunkHeader& header, const uint8_t* payload,
                   std::shared_ptr<ChunkConsumer> owner) {
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      if (head_ > 0 && head_ == queue_.size()) {
        queue_.clear();
        head_ = 0;
      }
      queue_.push_back(Item{wire::encode_chunk_header(header), payload, header.length, std::move(owner)});
      if (writing_) return;
      writing_ = true;
      asio::post(stream_->executor(), [self = shared_from_this()] { self->write_next(); });
      return;
    }
  }
  owner->chunk_dropped();
}

void OutLane::write_next() {
  {
    std::lock_guard lock(mu_);
    if (closed_ || head_ == queue_.size()) {
      writing_ = false;
      return;
    }
    current_ = std::move(queue_[head_++]);
  }
  std::array<asio::const_buffer, 2> buffers{asio::buffer(current_.header),
                                            asio::buffer(current_.payload, current_.length)};
  stream_->write_all(buffers, [self = shared_from_this()](std::error_code ec, size_t) {
    auto owner = std::move(self->current_.owner);
    if (ec) {
      owner->chunk_dropped();
      return self->fail(Status::failure(Errc::peer_lost, "link to the next peer failed: " + ec.message()));
    }
    owner->chunk_sent(self->current_.length);
    self->write_next();
  });
}

void OutLane::fail(const Status& why) {
  if (close_once() && on_error_) on_error_(why);
}

void OutLane::close() { close_once(); }

bool OutLane::close_once() {
  std::vector<Item> dropped;
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    closed_ = true;
    for (size_t i = head_; i < queue_.size(); ++i) dropped.push_back(std::move(queue_[i]));
    queue_.clear();
    head_ = 0;
  }
  for (auto& item : dropped) item.owner->chunk_dropped();
  asio::post(stream_->executor(), [self = shared_from_this()] { self->stream_->close(); });
  return true;
}

}  // namespace ferry::peer
