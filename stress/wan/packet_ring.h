// PacketRing: the forwarder's packet store, one preallocated byte ring.
//
// Packets are stored in arrival order but leave in release order, which differs between
// pairs of hosts with different delays (ReleaseSchedule keeps that order). A record is freed
// once it is sent or dropped (release()) AND every older record is freed too (reclaim()), so
// the ring holds everything that arrived while the oldest waiting packet waits: memory is
// bounded by the total ingress rate times the longest wait (Topology::packet_store_bytes()),
// preallocated once, and never grows with the number of pairs.
//
// Layout: records of [Header | packet bytes] padded to 32 bytes, laid contiguously so the
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

class PacketRing {
 public:
  struct Header {
    uint64_t time_ns;     // CLOCK_MONOTONIC: when the record leaves the queue it waits in
    uint64_t next;        // position of the next record in the same queue, or kNone
    uint32_t len;         // packet bytes, or kSkip
    uint32_t wire_bytes;  // IPv4 bytes on the wire: every segment's headers plus the payload
    uint16_t src, dst;    // host indices
    uint16_t segments;    // wire packets the frame stands for (GSO), for the counters
    uint16_t done;        // sent or dropped: reclaim() may free it
  };
  static_assert(sizeof(Header) == 32);
  static constexpr uint32_t kSkip = 0xffffffffu;
  static constexpr uint64_t kNone = ~uint64_t{0};
  static constexpr size_t kAlign = 32;  // a header fits in any gap before the end

  // capacity is rounded up to a multiple of 32 and to at least 4 maximum-size records.
  PacketRing(size_t capacity_bytes, size_t max_packet)
      : max_packet_(max_packet),
        max_record_(sizeof(Header) + round_up(max_packet)),
        cap_(std::max(round_up(capacity_bytes), 4 * max_record_)),
        buf_(new std::byte[cap_]) {
    std::memset(buf_.get(), 0, cap_);  // fault every page in now, not on the hot path
  }

  // Where the next packet (up to max_packet bytes) may be written, or nullptr when the ring
  // is full. Calling it again without commit() returns the same place.
  std::byte* reserve() {
    size_t off = tail_ % cap_;
    const size_t room_to_end = cap_ - off;
    const size_t skip = room_to_end < max_record_ ? room_to_end : 0;
    if (tail_ + skip + max_record_ - head_ > cap_) return nullptr;
    if (skip) {
      Header h{0, kNone, kSkip, 0, 0, 0, 0, 1};
      std::memcpy(buf_.get() + off, &h, sizeof h);  // room_to_end is a non-zero multiple of 32
      tail_ += skip;
      off = 0;
    }
    return buf_.get() + off + sizeof(Header);
  }

  // Stores the packet written at the last reserve() (len <= max_packet) and returns its
  // position; the caller fills in the rest of header(position).
  uint64_t commit(uint32_t len) {
    const uint64_t pos = tail_;
    Header h{0, kNone, len, 0, 0, 0, 1, 0};
    std::memcpy(buf_.get() + pos % cap_, &h, sizeof h);
    tail_ += sizeof(Header) + round_up(len);
    ++packets_;
    if (tail_ - head_ > peak_bytes_) peak_bytes_ = tail_ - head_;
    return pos;
  }

  Header* header(uint64_t pos) { return reinterpret_cast<Header*>(buf_.get() + pos % cap_); }
  static std::byte* data(Header* h) { return reinterpret_cast<std::byte*>(h + 1); }

  // The record at pos is sent or dropped; its space comes back at the next reclaim() once
  // every older record is released too.
  void release(uint64_t pos) {
    header(pos)->done = 1;
    --packets_;
  }

  // Frees released records from the oldest on, up to the first one still waiting.
  void reclaim() {
    while (head_ < tail_) {
      const Header* h = header(head_);
      if (!h->done) return;
      head_ += h->len == kSkip ? cap_ - head_ % cap_ : sizeof(Header) + round_up(h->len);
    }
  }

  size_t packets() const { return packets_; }  // committed and not yet released
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
  uint64_t head_ = 0;  // position of the oldest record not yet reclaimed (or a skip)
  uint64_t tail_ = 0;  // position where the next record goes
  size_t packets_ = 0;
  size_t peak_bytes_ = 0;
};

}  // namespace ferry::wan
