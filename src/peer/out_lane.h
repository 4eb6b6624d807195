// One outgoing connection of a ring link: its own thread takes chunks
// (header + a pointer into a collective's buffer) from the link's SendQueue,
// which all lanes share, and writes each with one blocking gather write.
// Chunks of concurrent collectives interleave in queue order.
//
// Nothing is copied: the kernel reads user memory in place. A chunk keeps
// its collective alive and counted as busy until it is written or dropped,
// so a failed collective cannot return to its caller while the kernel may
// still read its buffer.
//
// While idle the thread waits on an eventfd and on the socket's hang-up, so a
// far side that closes or resets is noticed before the next collective. A
// lane numbered at or above the link's count in use (ring_links.h) idles the
// same way, taking nothing, until the count grows or the link closes.
//
// Threading: close() from any thread; join() from any thread but the lane's
// own. The mutex guards the flags.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "net/stream.h"
#include "peer/link_stats.h"
#include "peer/send_queue.h"

namespace ferry::peer {

class OutLane : public std::enable_shared_from_this<OutLane> {
 public:
  using OnError = std::function<void(const Status&)>;

  // `in_use`: the link's count of lanes in use (null: this lane always works).
  // Throws Error (Errc::system) when its eventfd cannot be made (a full descriptor table).
  OutLane(std::shared_ptr<net::Stream> stream, uint32_t lane, std::shared_ptr<SendQueue> queue,
          std::shared_ptr<const std::atomic<uint32_t>> in_use, OnError on_error);
  ~OutLane();

  // Throws std::system_error when no thread can be made.
  void start();
  // Stops the lane (the chunk it is writing is dropped); the queue stays the link's to close.
  void close();
  void join();
  // The link's count in use changed: an idle lane looks again.
  void wake();
  std::thread::id thread_id() const { return thread_.get_id(); }
  // This connection's TCP figures (link_stats.h): one getsockopt, any thread.
  LaneSample sample();
  // Holds at most about `bytes` written but unsent in the socket (TCP_NOTSENT_LOWAT),
  // so this lane takes chunks only as fast as its window sends them. Any thread; once.
  void limit_unsent(uint32_t bytes);
  // TCP_CONGESTION of its connection: read, and switched on the fly (a no-op when already so).
  std::string congestion_control();
  void set_congestion_control(const std::string& name);

 private:
  void run();
  void write_until_closed(SendQueue::Item& item);  // item: the chunk in hand, if any
  bool next(SendQueue::Item& item);  // false once closed
  void fail(const Status& why);
  bool close_once();      // true for the call that closed it

  std::shared_ptr<net::Stream> stream_;
  const uint32_t lane_;
  const bool shared_memory_;  // its bytes go through a shared-memory ring: no TCP figures
  const std::shared_ptr<SendQueue> queue_;
  const std::shared_ptr<const std::atomic<uint32_t>> in_use_;
  OnError on_error_;
  int wake_fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  bool closed_ = false;  // guarded by mu_; so is stream_ against join()'s release
  bool unsent_limited_ = false;  // guarded by mu_
  std::string congestion_;       // guarded by mu_; as last set here
};

}  // namespace ferry::peer
