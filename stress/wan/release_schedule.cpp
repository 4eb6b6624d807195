#include "release_schedule.h"

#include <algorithm>
#include <functional>

namespace ferry::wan {

ReleaseSchedule::ReleaseSchedule(PacketRing& ring, size_t queues) : ring_(ring), queues_(queues) {
  heap_.reserve(queues);  // push_heap never allocates: at most one entry per queue
}

void ReleaseSchedule::push(size_t q, uint64_t pos) {
  Queue& queue = queues_[q];
  ring_.header(pos)->next = PacketRing::kNone;
  if (queue.head == PacketRing::kNone) {
    queue.head = queue.tail = pos;
    heap_.emplace_back(ring_.header(pos)->time_ns, q);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    return;
  }
  ring_.header(queue.tail)->next = pos;
  queue.tail = pos;
}

bool ReleaseSchedule::next_time(uint64_t& time_ns) const {
  if (heap_.empty()) return false;
  time_ns = heap_.front().first;
  return true;
}

bool ReleaseSchedule::pop_due(uint64_t now_ns, uint64_t& pos, size_t& q) {
  if (heap_.empty() || heap_.front().first > now_ns) return false;
  q = heap_.front().second;
  std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
  heap_.pop_back();
  Queue& queue = queues_[q];
  pos = queue.head;
  queue.head = ring_.header(pos)->next;
  if (queue.head == PacketRing::kNone) {
    queue.tail = PacketRing::kNone;
  } else {
    heap_.emplace_back(ring_.header(queue.head)->time_ns, q);
    std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  }
  return true;
}

}  // namespace ferry::wan
