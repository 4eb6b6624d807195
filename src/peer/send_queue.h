// The chunks waiting to go to the next peer, shared by every lane (connection)
// of a ring link. A lane takes the next chunk only once it has handed its last
// one to the kernel, so each connection carries what it can drain: one that
// loss has slowed (cubic halving its window, a retransmission timeout) takes
// fewer chunks and the others more. A fixed chunk-to-lane mapping instead let
// the slowest connection set the pace of the whole op.
//
// Each queued chunk keeps its collective alive and counted as busy until it
// is written or dropped (see ChunkConsumer).
//
// Threading: every call from any thread; one mutex guards the queue.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "peer/chunk_consumer.h"
#include "wire/chunk_header.h"

namespace ferry::peer {

class SendQueue {
 public:
  struct Item {
    wire::ChunkHeader header;
    const uint8_t* payload = nullptr;
    std::shared_ptr<ChunkConsumer> owner;
    bool checksum_pending = false;  // the lane hashes the payload just before writing it
  };
  enum class Take { item, empty, closed };

  // Queues `item` and wakes one idle lane. Once closed, the item is dropped
  // (its owner told) instead.
  void push(Item item);
  // The oldest chunk, if any. On `empty`, `wake_fd` (an eventfd) is written
  // when a chunk arrives or the queue closes, so the lane can sleep on it.
  Take take(Item& out, int wake_fd);
  // A lane that takes nothing for now (idle by the link's count) stops
  // sleeping on the queue; a wakeup meant for it goes to another sleeper when
  // chunks wait. False once closed.
  bool leave(int wake_fd);
  // Drops every queued chunk and wakes every idle lane. Idempotent.
  void close();

 private:
  static void wake(int fd);

  std::mutex mu_;
  std::vector<Item> items_;     // guarded by mu_; reused, so no allocation per chunk once warm
  size_t head_ = 0;             // guarded by mu_
  std::vector<int> sleepers_;   // guarded by mu_: wake fds of lanes that found the queue empty
  bool closed_ = false;         // guarded by mu_
};

}  // namespace ferry::peer
