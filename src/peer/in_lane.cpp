#include "peer/in_lane.h"

#include <pthread.h>

#include "peer/escaped_exception.h"

namespace ferry::peer {

InLane::InLane(std::shared_ptr<net::Stream> stream, uint32_t lane, FindStarted find_started,
               OnError on_error)
    : stream_(std::move(stream)), lane_(lane), find_started_(std::move(find_started)), on_error_(std::move(on_error)) {}

InLane::~InLane() {
  close();
  if (thread_.joinable()) thread_.detach();  // only if never joined: see RingLinks
}

void InLane::start() {
  thread_ = std::thread([self = shared_from_this()] { self->run(); });
}

void InLane::close() {
  if (closed_.exchange(true)) return;
  // Any thread may close while join() releases the stream: abort through a reference.
  std::shared_ptr<net::Stream> stream;
  {
    std::lock_guard lock(mu_);
    stream = stream_;
  }
  if (stream) stream->abort();
}

void InLane::join() {
  if (!thread_.joinable() || thread_.get_id() == std::this_thread::get_id()) return;
  thread_.join();
  // The socket belongs to the communicator's io_context: release it while that surely exists.
  closed_ = true;
  std::lock_guard lock(mu_);
  stream_.reset();
}

void InLane::run() {
  Status st;
  // Nothing may escape a lane's thread (std::terminate): what does fails the link.
  try {
    std::string name = "ferry-in-" + std::to_string(lane_);
    pthread_setname_np(pthread_self(), name.c_str());
    while (st.ok()) st = receive_one();
  } catch (...) {
    st = status_of_current_exception("an in-lane failed");
  }
  if (!closed_.exchange(true)) {
    stream_->abort();
    if (on_error_) on_error_(st);
  }
}

Status InLane::receive_one() {
  std::array<uint8_t, wire::kChunkHeaderBytes> bytes{};
  if (auto ec = stream_->read_exact_blocking(asio::buffer(bytes)))
    return Status::failure(Errc::peer_lost, "link from the previous peer closed: " + ec.message());
  wire::ChunkHeader header;
  if (!wire::decode_chunk_header(bytes.data(), header))
    return Status::failure(Errc::protocol, "malformed chunk header from the previous peer");
  // Its collective may not have started here yet (the master's go is on its way): wait for it.
  auto found = find_started_(header.seq);
  if (!found.consumer) return found.error;
  uint8_t* destination = nullptr;
  if (Status st = found.consumer->payload_destination(header, lane_, staging_, destination); !st.ok()) return st;
  if (destination == staging_.data() && header.length > 0) {
    // Staged bytes are only read, to be combined: where the stream can lend
    // them in place (shared memory) that saves a copy.
    std::error_code ec;
    if (const uint8_t* lent = stream_->borrow_blocking(header.length, ec)) {
      Status st = found.consumer->payload_received(header, lane_, lent);
      stream_->release_borrowed(header.length);
      return st;
    }
    if (ec) {
      found.consumer->payload_abandoned();
      return Status::failure(Errc::peer_lost, "link from the previous peer closed: " + ec.message());
    }
  }
  if (auto ec = stream_->read_exact_blocking(asio::buffer(destination, header.length))) {
    found.consumer->payload_abandoned();
    return Status::failure(Errc::peer_lost, "link from the previous peer closed: " + ec.message());
  }
  return found.consumer->payload_received(header, lane_, destination);
}

}  // namespace ferry::peer
