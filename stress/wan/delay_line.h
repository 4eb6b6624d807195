// DelayLine: the forwarder's packet store, one preallocated byte ring in release order.
//
// Every packet waits the same one-way delay, so release time = arrival time + delay is
// non-decreasing in arrival order and a single FIFO is already sorted by release time: no
// heap, no per-destination queues, and the order of every flow (indeed of every packet) is
// kept. Memory is bounded by what all hosts can send in one delay, not by hosts².
//
// Layout: records of [Header | packet bytes] padded to 16 bytes, laid contiguously so the
// kernel reads a packet straight into its final place (no copy). A record never wraps: when
// the space left before the end of the buffer is too small for a maximum-size record, the
// producer writes a skip header there and starts again at offset 0. Positions are 64-bit
// counters that never wrap (physical offset = position % capacity).
//
// Single-threaded: the forwarder's event loop is its only user.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace ferry::wan {

class DelayLine {
 public:
  struct Header {
    uint64_t release_ns;  // CLOCK_MONOTONIC
    uint32_t len;         // packet bytes, or kSkip
    uint16_t dst;         // destination host index
    uint16_t segments;    // wire packets the frame stands for (GSO), for the counters
  };
  static_assert(sizeof(Header) == 16);
  static constexpr uint32_t kSkip = 0xffffffffu;
  static constexpr size_t kAlign = 16;

  // capacity is rounded up to a multiple of 16 and to at least 4 maximum-size records.
  DelayLine(size_t capacity_bytes, size_t max_packet)
      : max_packet_(max_packet),
        max_record_(sizeof(Header) + round_up(max_packet)),
        cap_(std::max(round_up(capacity_bytes), 4 * max_record_)),
        buf_(new std::byte[cap_]) {
    std::memset(buf_.get(), 0, cap_);  // fault every page in now, not on the hot path
  }

  // Where the next packet (up to max_packet bytes) may be written, or nullptr when the line
  // is full. Calling it again without commit() returns the same place.
  std::byte* reserve() {
    size_t off = tail_ % cap_;
    const size_t room_to_end = cap_ - off;
    const size_t skip = room_to_end < max_record_ ? room_to_end : 0;
    if (tail_ + skip + max_record_ - head_ > cap_) return nullptr;
    if (skip) {
      Header h{0, kSkip, 0, 0};
      std::memcpy(buf_.get() + off, &h, sizeof h);  // room_to_end >= 16: offsets are 16-aligned
      tail_ += skip;
      off = 0;
    }
    return buf_.get() + off + sizeof(Header);
  }

  // Appends the packet written at the last reserve(). len <= max_packet.
  void commit(uint32_t len, uint64_t release_ns, uint16_t dst, uint16_t segments = 1) {
    const size_t off = tail_ % cap_;
    Header h{release_ns, len, dst, segments};
    std::memcpy(buf_.get() + off, &h, sizeof h);
    tail_ += sizeof(Header) + round_up(len);
    ++packets_;
    if (tail_ - head_ > peak_bytes_) peak_bytes_ = tail_ - head_;
  }

  // Oldest packet, or nullptr when empty. The data follows the header.
  const Header* front() {
    while (head_ < tail_) {
      const size_t off = head_ % cap_;
      const auto* h = reinterpret_cast<const Header*>(buf_.get() + off);
      if (h->len == kSkip) {
        head_ += cap_ - off;
        continue;
      }
      return h;
    }
    return nullptr;
  }
  static const std::byte* data(const Header* h) { return reinterpret_cast<const std::byte*>(h + 1); }

  // Removes front(); only valid right after front() returned non-null.
  void pop() {
    const auto* h = reinterpret_cast<const Header*>(buf_.get() + head_ % cap_);
    head_ += sizeof(Header) + round_up(h->len);
    --packets_;
  }

  bool empty() const { return packets_ == 0; }
  size_t packets() const { return packets_; }
  size_t bytes_used() const { return tail_ - head_; }
  size_t peak_bytes() const { return peak_bytes_; }
  size_t capacity() const { return cap_; }
  size_t max_packet() const { return max_packet_; }

 private:
  static size_t round_up(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

  size_t max_packet_;
  size_t max_record_;
  size_t cap_;
  std::unique_ptr<std::byte[]> buf_;
  uint64_t head_ = 0;  // position of the oldest record (or skip)
  uint64_t tail_ = 0;  // position where the next record goes
  size_t packets_ = 0;
  size_t peak_bytes_ = 0;
};

}  // namespace ferry::wan
