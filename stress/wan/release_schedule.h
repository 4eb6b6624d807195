// ReleaseSchedule: which stored packet leaves next, across many FIFO queues.
//
// The forwarder keeps one queue per ordered pair of hosts (the pair's cap and delay act
// there) and one per destination (its downlink). Within a queue, release times never go
// back (one delay, one FIFO token bucket per queue), so each queue is a linked list threaded
// through the PacketRing's headers, and a binary heap holds one entry per non-empty queue,
// keyed by its head's time. Cost per packet: O(log queues); memory: two positions per queue
// and a heap of at most `queues` entries, all allocated up front.
//
// With one delay for every pair (the uniform spec) this releases exactly in arrival order,
// as the single FIFO it replaces did.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "packet_ring.h"

namespace ferry::wan {

class ReleaseSchedule {
 public:
  ReleaseSchedule(PacketRing& ring, size_t queues);

  // Appends the record at `pos` (its header's time_ns set, not before the queue's last) to
  // queue `q`.
  void push(size_t q, uint64_t pos);
  // The earliest time any queue's head is due; false when every queue is empty.
  bool next_time(uint64_t& time_ns) const;
  // Removes the earliest head when it is due at `now_ns`: its position and queue.
  bool pop_due(uint64_t now_ns, uint64_t& pos, size_t& q);

  bool empty() const { return heap_.empty(); }
  bool empty(size_t q) const { return queues_[q].head == PacketRing::kNone; }

 private:
  struct Queue {
    uint64_t head = PacketRing::kNone;
    uint64_t tail = PacketRing::kNone;
  };
  using Entry = std::pair<uint64_t, size_t>;  // head's time, queue

  PacketRing& ring_;
  std::vector<Queue> queues_;
  std::vector<Entry> heap_;  // min-heap on time
};

}  // namespace ferry::wan
