// One outgoing connection of a ring link: a FIFO of chunks (header + a
// pointer into a collective's buffer), written one at a time with a gather
// write. Chunks of concurrent collectives interleave here in queue order.
//
// The queue holds pointers, never copies: the kernel reads user memory in
// place. Each queued chunk keeps its collective alive and counted as busy
// until it is written or dropped, so a failed collective cannot return to
// its caller while the kernel may still read its buffer.
//
// Threading: push() and close() from any thread; I/O on the stream's strand.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "net/stream.h"
#include "peer/chunk_consumer.h"
#include "wire/chunk_header.h"

namespace ferry::peer {

class OutLane : public std::enable_shared_from_this<OutLane> {
 public:
  using OnError = std::function<void(const Status&)>;

  OutLane(std::shared_ptr<net::Stream> stream, OnError on_error);

  // Starts watching the connection for a close by the far side (it never sends on this lane).
  void start();
  void push(const wire::ChunkHeader& header, const uint8_t* payload,
            std::shared_ptr<ChunkConsumer> owner);
  void close();

 private:
  struct Item {
    std::array<uint8_t, wire::kChunkHeaderBytes> header;
    const uint8_t* payload;
    size_t length;
    std::shared_ptr<ChunkConsumer> owner;
  };

  void write_next();  // on the strand
  void fail(const Status& why);
  bool close_once();  // true for the call that closed it

  std::shared_ptr<net::Stream> stream_;
  OnError on_error_;
  std::mutex mu_;
  std::vector<Item> queue_;  // guarded by mu_; a ring that only grows: no allocation per chunk
  size_t head_ = 0;          // guarded by mu_
  bool writing_ = false;     // guarded by mu_
  bool closed_ = false;      // guarded by mu_
  Item current_;             // the chunk being written; only on the strand
  std::array<uint8_t, 1> probe_{};
};

}  // namespace ferry::peer
