#include "peer/in_lane.h"

#include <asio/post.hpp>

namespace ferry::peer {

InLane::InLane(std::shared_ptr<net::Stream> stream, uint32_t lane, std::shared_ptr<OpDirectory> directory,
               OnError on_error)
    : stream_(std::move(stream)), lane_(lane), directory_(std::move(directory)), on_error_(std::move(on_error)) {}

void InLane::start() {
  asio::post(stream_->executor(), [self = shared_from_this()] { self->read_header(); });
}

void InLane::close() {
  asio::post(stream_->executor(), [self = shared_from_this()] {
    self->closed_ = true;
    self->stream_->close();
  });
}

void InLane::read_header() {
  if (closed_) return;
  stream_->read_exact(asio::buffer(header_bytes_), [self = shared_from_this()](std::error_code ec, size_t) {
    if (ec) return self->fail(Status::failure(Errc::peer_lost, "link from the previous peer closed: " + ec.message()));
    if (!wire::decode_chunk_header(self->header_bytes_.data(), self->header_))
      return self->fail(Status::failure(Errc::protocol, "malformed chunk header from the previous peer"));
    self->dispatch();
  });
}

void InLane::dispatch() {
  if (closed_) return;
  auto self = shared_from_this();
  auto found = directory_->find(header_.seq, [self] {
    asio::post(self->stream_->executor(), [self] { self->dispatch(); });
  });
  if (found.parked) return;
  if (!found.consumer) return fail(found.error);
  consumer_ = std::move(found.consumer);
  Status st = consumer_->payload_destination(header_, lane_, staging_, destination_);
  if (!st.ok()) {
    consumer_.reset();
    return fail(st);
  }
  read_payload();
}

void InLane::read_payload() {
  stream_->read_exact(asio::buffer(destination_, header_.length), [self = shared_from_this()](std::error_code ec,
                                                                                              size_t) {
    auto consumer = std::move(self->consumer_);
    if (ec) {
      consumer->payload_abandoned();
      return self->fail(Status::failure(Errc::peer_lost, "link from the previous peer closed: " + ec.message()));
    }
    Status st = consumer->payload_received(self->header_, self->lane_, self->destination_);
    if (!st.ok()) return self->fail(st);
    self->read_header();
  });
}

void InLane::fail(const Status& why) {
  if (closed_) return;
  closed_ = true;
  stream_->close();
  if (on_error_) on_error_(why);
}

}  // namespace ferry::peer
