// One incoming connection of a ring link, read by this lane's own thread:
// a chunk header, then (once its collective has started) the payload straight
// to where the collective wants it, then the collective's processing of it.
// One read at a time, so one staging buffer per lane suffices; the kernel
// keeps receiving chunk i+1 while chunk i is reduced. A shared-memory lane
// lends staged payloads in place instead (Stream::borrow_blocking).
//
// Threading: start()/close()/join() from other threads; the rest on the lane's thread.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "net/stream.h"
#include "peer/chunk_consumer.h"
#include "wire/chunk_header.h"

namespace ferry::peer {

class InLane : public std::enable_shared_from_this<InLane> {
 public:
  using OnError = std::function<void(const Status&)>;
  // The collective a chunk header names, once it has started (blocks until then; bounded).
  using FindStarted = std::function<ChunkLookup(uint32_t seq)>;

  InLane(std::shared_ptr<net::Stream> stream, uint32_t lane, FindStarted find_started, OnError on_error);
  ~InLane();

  // Throws std::system_error when no thread can be made.
  void start();
  void close();
  void join();
  std::thread::id thread_id() const { return thread_.get_id(); }
  uint32_t lane() const { return lane_; }

 private:
  void run();
  Status receive_one();

  std::mutex mu_;                        // guards stream_ against join() while another thread closes
  std::shared_ptr<net::Stream> stream_;  // used without the lock only on the lane's thread, which join() ends first
  const uint32_t lane_;
  const FindStarted find_started_;
  OnError on_error_;
  std::thread thread_;
  std::atomic<bool> closed_{false};
  std::vector<uint8_t> staging_;  // only on the lane's thread
};

}  // namespace ferry::peer
