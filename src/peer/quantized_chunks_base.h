// What both families of quantized chunks (quantized_chunks.h) share: the
// arena of send slots, per-lane scratch, and the caller's tensors seen in the
// accumulation type T (float for f16/bf16/f32 data, double for f64).
// Internal to src/peer.
#pragma once

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "peer/quantized_chunks.h"
#include "wire/messages.h"

namespace ferry::peer {

template <class T>
class QuantizedChunksBase : public QuantizedChunks {
 public:
  uint8_t* slot(uint32_t unit) override { return arena_.data() + offsets_[unit]; }

 protected:
  struct Scratch {
    std::vector<T> local, acc;
  };

  QuantizedChunksBase(const RingPlan& plan, DType dtype, ReduceOp op, QuantizedBuffers buffers)
      : plan_(plan), dtype_(dtype), op_(op), send_(static_cast<const uint8_t*>(buffers.send)),
        recv_(static_cast<uint8_t*>(buffers.recv)), pool_(buffers.pool) {
    for (uint32_t u = 0; u < plan_.units(); ++u)
      max_chunk_ = std::max(max_chunk_, std::max(plan_.send_range(u).count, plan_.recv_range(u).count));
    // Per lane (a link may grow to the most lanes there are), and one more for
    // the starting thread: each made on first use by the one thread it serves.
    scratch_.resize(wire::kMaxConnectionsPerLink + 1);
  }

  // Sizes the send slots by the derived class's wire_bytes: call from its constructor.
  void allocate_slots() {
    offsets_.assign(plan_.units() + 1, 0);
    for (uint32_t u = 0; u < plan_.units(); ++u) {
      size_t n = plan_.send_range(u).count;
      offsets_[u + 1] = offsets_[u] + (n ? wire_bytes(plan_.step_of(u), n) : 0);
    }
    // Every byte of a slot is written (encoded) before it is sent: uninitialized is fine.
    arena_ = pool_ ? pool_->acquire(offsets_.back()) : BufferPool().acquire(offsets_.back());
  }

  Scratch& scratch(uint32_t lane) {
    Scratch& s = scratch_.at(lane);
    if (s.acc.size() < max_chunk_) {
      s.local.resize(widened() ? max_chunk_ : 0);
      s.acc.resize(max_chunk_);
    }
    return s;
  }

  bool widened() const { return dtype_ == DType::f16 || dtype_ == DType::bf16; }
  static constexpr DType acc_dtype() { return std::is_same_v<T, float> ? DType::f32 : DType::f64; }

  // The caller's input over r as T: in place for f32/f64 data, widened into
  // `into` (r.count elements) for 16-bit data.
  const T* input(ElementRange r, T* into) const {
    const uint8_t* at = send_ + r.begin * plan_.elem_size();
    if (!widened()) return reinterpret_cast<const T*>(at);
    if constexpr (std::is_same_v<T, float>) {
      auto* src = reinterpret_cast<const uint16_t*>(at);
      if (dtype_ == DType::f16)
        f16_to_f32(src, into, r.count);
      else
        bf16_to_f32(src, into, r.count);
    }
    return into;
  }
  const T* input(Scratch& s, ElementRange r) const { return input(r, s.local.data()); }

  // Where a result over r is decoded: the caller's output itself for f32/f64
  // data, else s.acc, which store_result() then narrows into the output.
  T* result_buffer(Scratch& s, ElementRange r) {
    return widened() ? s.acc.data() : reinterpret_cast<T*>(recv_ + r.begin * plan_.elem_size());
  }
  void store_result(Scratch& s, ElementRange r) {
    if (!widened()) return;
    if constexpr (std::is_same_v<T, float>) {
      auto* dst = reinterpret_cast<uint16_t*>(recv_ + r.begin * plan_.elem_size());
      if (dtype_ == DType::f16)
        f32_to_f16(s.acc.data(), dst, r.count);
      else
        f32_to_bf16(s.acc.data(), dst, r.count);
    }
  }

  const RingPlan plan_;
  const DType dtype_;
  const ReduceOp op_;
  const uint8_t* const send_;
  uint8_t* const recv_;
  size_t max_chunk_ = 0;  // elements

 private:
  std::vector<size_t> offsets_;   // per unit: its slot in arena_
  BufferPool* const pool_;
  BufferPool::Buffer arena_;
  std::vector<Scratch> scratch_;  // entry i touched only by lane i's thread
};

}  // namespace ferry::peer
