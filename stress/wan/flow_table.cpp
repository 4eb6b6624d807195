#include "flow_table.h"

#include <stdexcept>

namespace ferry::wan {

FlowTable::FlowTable(size_t capacity, uint64_t timeout_ns) : timeout_ns_(timeout_ns) {
  if (capacity == 0 || capacity > (size_t{1} << 24))
    throw std::invalid_argument("flow table: capacity must be 1..2^24");
  if (timeout_ns == 0) throw std::invalid_argument("flow table: timeout must be positive");
  size_t buckets = 1;
  while (buckets * kWays < capacity) buckets *= 2;
  slots_.resize(buckets * kWays);
  bucket_mask_ = buckets - 1;
}

size_t FlowTable::bucket_of(uint64_t key) const {
  // splitmix64's finaliser: ports and host indices differ in few low bits.
  uint64_t z = key + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<size_t>(z ^ (z >> 31)) & bucket_mask_;
}

void FlowTable::opened(uint64_t key, uint64_t now_ns) {
  Slot* bucket = &slots_[bucket_of(key) * kWays];
  const uint64_t expires = now_ns + timeout_ns_;
  for (size_t w = 0; w < kWays; ++w)
    if (bucket[w].key == key && bucket[w].expires_ns > now_ns) {
      bucket[w].expires_ns = expires;  // a retransmitted or repeated SYN
      return;
    }
  Slot* target = &bucket[0];  // a free or expired way, else the one that expires first
  for (size_t w = 0; w < kWays; ++w) {
    if (bucket[w].expires_ns <= now_ns) {
      target = &bucket[w];
      break;
    }
    if (bucket[w].expires_ns < target->expires_ns) target = &bucket[w];
  }
  if (target->expires_ns > now_ns) ++evicted_;
  *target = Slot{key, expires};
}

bool FlowTable::admits(uint64_t key, uint64_t now_ns) const {
  const Slot* bucket = &slots_[bucket_of(key) * kWays];
  for (size_t w = 0; w < kWays; ++w)
    if (bucket[w].key == key && bucket[w].expires_ns > now_ns) return true;
  return false;
}

}  // namespace ferry::wan
