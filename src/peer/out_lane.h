// One outgoing connection of a ring link: a FIFO of chunks (header + a
// pointer into a collective's buffer) written by this lane's own thread with
// blocking gather writes. Chunks of concurrent collectives interleave here
// in queue order.
//
// The queue holds pointers, never copies: the kernel reads user memory in
// place. Each queued chunk keeps its collective alive and counted as busy
// until it is written or dropped, so a failed collective cannot return to
// its caller while the kernel may still read its buffer.
//
// While idle the thread waits on an eventfd and on the socket's hang-up, so a
// far side that closes or resets is noticed before the next collective.
//
// Threading: push() and close() from any thread; join() from any thread but
// the lane's own. The mutex guards the queue and the flags.
#pragma once

#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "net/stream.h"
#include "peer/chunk_consumer.h"
#include "wire/chunk_header.h"

namespace ferry::peer {

class OutLane : public std::enable_shared_from_this<OutLane> {
 public:
  using OnError = std::function<void(const Status&)>;

  OutLane(std::shared_ptr<net::Stream> stream, uint32_t lane, OnError on_error);
  ~OutLane();

  void start();
  // With `checksum_pending`, the lane computes header.checksum itself just
  // before writing: step-0 chunks are then hashed by all lanes in parallel
  // instead of one after another by the thread that starts the operation.
  void push(const wire::ChunkHeader& header, const uint8_t* payload, std::shared_ptr<ChunkConsumer> owner,
            bool checksum_pending = false);
  void close();
  void join();
  std::thread::id thread_id() const { return thread_.get_id(); }

 private:
  struct Item {
    wire::ChunkHeader header;
    const uint8_t* payload;
    std::shared_ptr<ChunkConsumer> owner;
    bool checksum_pending;
  };

  void run();
  bool next(Item& item);  // false once closed
  void fail(const Status& why);
  bool close_once();      // true for the call that closed it

  std::shared_ptr<net::Stream> stream_;
  const uint32_t lane_;
  OnError on_error_;
  int wake_fd_ = -1;
  std::thread thread_;
  std::mutex mu_;
  std::vector<Item> queue_;  // guarded by mu_; a ring that only grows: no allocation per chunk
  size_t head_ = 0;          // guarded by mu_
  bool sleeping_ = false;    // guarded by mu_: the thread waits in poll()
  bool closed_ = false;      // guarded by mu_
};

}  // namespace ferry::peer
