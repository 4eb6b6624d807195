#include "peer/out_lane.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <utility>

#include "core/hash.h"
#include "net/shm_stream.h"
#include "net/socket_options.h"
#include "peer/escaped_exception.h"

namespace ferry::peer {

OutLane::OutLane(std::shared_ptr<net::Stream> stream, uint32_t lane, std::shared_ptr<SendQueue> queue,
                 std::shared_ptr<const std::atomic<uint32_t>> in_use, OnError on_error)
    : stream_(std::move(stream)), lane_(lane), shared_memory_(dynamic_cast<net::ShmStream*>(stream_.get()) != nullptr),
      queue_(std::move(queue)), in_use_(std::move(in_use)), on_error_(std::move(on_error)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  // Typically EMFILE: a full descriptor table fails this link set-up, not the process.
  if (wake_fd_ < 0) throw Error(Errc::system, std::string("cannot create an eventfd: ") + std::strerror(errno));
}

OutLane::~OutLane() {
  close();
  if (thread_.joinable()) thread_.detach();  // only if never joined: see RingLinks
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void OutLane::start() {
  thread_ = std::thread([self = shared_from_this()] { self->run(); });
}

void OutLane::join() {
  if (!thread_.joinable() || thread_.get_id() == std::this_thread::get_id()) return;
  thread_.join();
  // The socket belongs to the communicator's io_context: release it now, while
  // that surely exists, not whenever the last collective holding us goes.
  std::lock_guard lock(mu_);
  stream_.reset();
}

LaneSample OutLane::sample() {
  // Under the lock: join() may release the stream, and its descriptor with it, at any moment.
  std::lock_guard lock(mu_);
  if (shared_memory_) return {true, std::nullopt};
  if (closed_ || !stream_) return {};
  return {false, read_tcp_info(stream_->native_handle())};
}

void OutLane::limit_unsent(uint32_t bytes) {
  std::lock_guard lock(mu_);
  if (shared_memory_ || closed_ || !stream_ || std::exchange(unsent_limited_, true)) return;
  (void)net::limit_unsent(stream_->native_handle(), bytes);
}

std::string OutLane::congestion_control() {
  std::lock_guard lock(mu_);
  if (shared_memory_ || closed_ || !stream_) return {};
  return net::congestion_control_of(stream_->native_handle());
}

void OutLane::set_congestion_control(const std::string& name) {
  std::lock_guard lock(mu_);
  if (shared_memory_ || closed_ || !stream_ || name.empty() || congestion_ == name) return;
  congestion_ = name;
  (void)net::set_congestion_control(stream_->native_handle(), name);  // refused: the lane keeps its own
}

bool OutLane::next(SendQueue::Item& item) {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return false;
    }
    if (in_use_ && lane_ >= in_use_->load()) {
      // Idle by the link's count: a wakeup the queue gave us goes to a lane in use.
      if (!queue_->leave(wake_fd_)) return false;
    } else {
      switch (queue_->take(item, wake_fd_)) {
        case SendQueue::Take::item: return true;
        case SendQueue::Take::closed: return false;
        case SendQueue::Take::empty: break;
      }
    }
    // Idle: wake for new work, or when the far side hangs up (never for its data: it sends none here).
    std::array<pollfd, 2> fds{pollfd{wake_fd_, POLLIN, 0}, pollfd{stream_->native_handle(), POLLRDHUP, 0}};
    int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0 && errno != EINTR) {
      fail(Status::failure(Errc::system, "poll failed on a link"));
      return false;
    }
    if (fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      fail(Status::failure(Errc::peer_lost, "link to the next peer closed"));
      return false;
    }
    uint64_t drained;
    (void)!::read(wake_fd_, &drained, sizeof drained);
  }
}

void OutLane::run() {
  // Nothing may escape a lane's thread (std::terminate): what does fails the
  // link, and the chunk in hand is dropped so that its collective can end.
  SendQueue::Item item;
  try {
    std::string name = "ferry-out-" + std::to_string(lane_);
    pthread_setname_np(pthread_self(), name.c_str());
    write_until_closed(item);
  } catch (...) {
    if (item.owner) std::exchange(item.owner, nullptr)->chunk_dropped();
    fail(status_of_current_exception("an out-lane failed"));
  }
}

void OutLane::write_until_closed(SendQueue::Item& item) {
  while (next(item)) {
    if (item.checksum_pending) item.header.checksum = hash_bytes(item.payload, item.header.length);
    auto header = wire::encode_chunk_header(item.header);
    std::array<asio::const_buffer, 2> buffers{asio::buffer(header), asio::buffer(item.payload, item.header.length)};
    std::error_code ec = stream_->write_all_blocking(buffers);
    auto owner = std::move(item.owner);
    if (ec) {
      owner->chunk_dropped();
      fail(Status::failure(Errc::peer_lost, "link to the next peer failed: " + ec.message()));
      break;
    }
    owner->chunk_sent(item.header.length);
  }
}

void OutLane::fail(const Status& why) {
  if (close_once() && on_error_) on_error_(why);
}

void OutLane::close() { close_once(); }

void OutLane::wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

bool OutLane::close_once() {
  // Any thread may close (a failing in-lane closes the whole link) while join()
  // releases the stream: abort through a reference taken under the lock.
  std::shared_ptr<net::Stream> stream;
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    closed_ = true;
    stream = stream_;
  }
  if (stream) stream->abort();
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  return true;
}

}  // namespace ferry::peer
