#include "peer/quantized_chunks.h"

#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "core/reduce.h"
#include "wire/messages.h"

namespace ferry::peer {
namespace {

// T: the accumulation type. The data type is T itself, or a 16-bit float widened to T = float.
template <class T>
class QuantizedChunksFor final : public QuantizedChunks {
 public:
  QuantizedChunksFor(const RingPlan& plan, DType dtype, QuantSpec spec) : plan_(plan), dtype_(dtype), spec_(spec) {
    size_t max_chunk = 0;
    offsets_.assign(plan_.units() + 1, 0);
    for (uint32_t u = 0; u < plan_.units(); ++u) {
      size_t n = plan_.send_range(u).count;
      max_chunk = std::max(max_chunk, std::max(n, plan_.recv_range(u).count));
      offsets_[u + 1] = offsets_[u] + (n ? wire_bytes(n) : 0);
    }
    arena_.resize(offsets_.back());
    max_chunk_ = max_chunk;
    // Per lane (a link may grow to the most lanes there are), and one more for
    // the starting thread: each made on first use by the one thread it serves.
    scratch_.resize(wire::kMaxConnectionsPerLink + 1);
  }

  size_t wire_bytes(size_t count) const override { return quant_encoded_bytes<T>(spec_, count); }
  uint8_t* slot(uint32_t unit) override { return arena_.data() + offsets_[unit]; }

  void encode_own(uint32_t unit, const void* local, size_t count) override {
    quant_encode<T>(spec_, as_t(scratch(wire::kMaxConnectionsPerLink), local, count), count, slot(unit));
  }

  Status hop(uint32_t lane, ReduceOp op, const uint8_t* in, size_t in_bytes, const void* local, size_t count,
             uint32_t next) override {
    Scratch& s = scratch(lane);
    const T* l = as_t(s, local, count);
    if (op == ReduceOp::sum || op == ReduceOp::avg)  // the hot path, fused in L1
      return quant_decode_add_encode<T>(spec_, in, in_bytes, l, count, slot(next));
    if (Status st = combine(s, op, in, in_bytes, l, count); !st.ok()) return st;
    quant_encode<T>(spec_, s.acc.data(), count, slot(next));
    return Status::success();
  }

  Status finish_owner(uint32_t lane, ReduceOp op, const uint8_t* in, size_t in_bytes, const void* local, size_t count,
                      uint32_t world, uint32_t next, void* result) override {
    Scratch& s = scratch(lane);
    if (Status st = combine(s, op, in, in_bytes, as_t(s, local, count), count); !st.ok()) return st;
    if (op == ReduceOp::avg) finalize_avg(acc_dtype(), s.acc.data(), count, world);
    quant_encode<T>(spec_, s.acc.data(), count, slot(next));
    // The owner keeps what everyone else gets: the decode of the bytes it sends.
    return deliver(lane, slot(next), wire_bytes(count), count, result);
  }

  Status deliver(uint32_t lane, const uint8_t* bytes, size_t size, size_t count, void* result) override {
    if (!widened()) return quant_decode<T>(spec_, bytes, size, count, static_cast<T*>(result));
    Scratch& s = scratch(lane);
    if (Status st = quant_decode<T>(spec_, bytes, size, count, s.acc.data()); !st.ok()) return st;
    narrow(s.acc.data(), count, result);
    return Status::success();
  }

 private:
  struct Scratch {
    std::vector<T> local, acc;
  };

  // Lane `lane`'s scratch (an in-lane's number; kMaxConnectionsPerLink: the starting thread's).
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

  // The local input as T: in place for f32/f64 data, widened into scratch for 16-bit data.
  const T* as_t(Scratch& s, const void* local, size_t count) {
    if (!widened()) return static_cast<const T*>(local);
    if constexpr (std::is_same_v<T, float>) {
      auto* src = static_cast<const uint16_t*>(local);
      if (dtype_ == DType::f16)
        f16_to_f32(src, s.local.data(), count);
      else
        bf16_to_f32(src, s.local.data(), count);
    }
    return s.local.data();
  }

  void narrow(const T* acc, size_t count, void* out) {
    if constexpr (std::is_same_v<T, float>) {
      auto* dst = static_cast<uint16_t*>(out);
      if (dtype_ == DType::f16)
        f32_to_f16(acc, dst, count);
      else
        f32_to_bf16(acc, dst, count);
    }
  }

  // s.acc = decode(in) op local, in T.
  Status combine(Scratch& s, ReduceOp op, const uint8_t* in, size_t in_bytes, const T* local, size_t count) {
    if (op == ReduceOp::sum || op == ReduceOp::avg)
      return quant_decode_add<T>(spec_, in, in_bytes, local, count, s.acc.data());
    if (Status st = quant_decode<T>(spec_, in, in_bytes, count, s.acc.data()); !st.ok()) return st;
    reduce(acc_dtype(), op, s.acc.data(), s.acc.data(), local, count);
    return Status::success();
  }

  const RingPlan plan_;
  const DType dtype_;
  const QuantSpec spec_;
  std::vector<size_t> offsets_;  // per unit: its slot in arena_
  std::vector<uint8_t> arena_;
  size_t max_chunk_ = 0;            // elements
  std::vector<Scratch> scratch_;    // entry i touched only by lane i's thread
};

}  // namespace

std::unique_ptr<QuantizedChunks> QuantizedChunks::create(const RingPlan& plan, DType dtype, QuantSpec spec) {
  if (!quant_spec_valid(spec))
    throw Error(Errc::invalid_argument, "quantization block must be 1.." + std::to_string(kMaxQuantBlock));
  bool half_wire = spec.kind == Quant::f16 || spec.kind == Quant::bf16;
  switch (dtype) {
    case DType::f32:
      return std::make_unique<QuantizedChunksFor<float>>(plan, dtype, spec);
    case DType::f64:
      return std::make_unique<QuantizedChunksFor<double>>(plan, dtype, spec);
    case DType::f16:
    case DType::bf16:
      if (half_wire)
        throw Error(Errc::invalid_argument, std::string("quantizing ") + std::string(dtype_name(dtype)) + " data to " +
                                                std::string(quant_name(spec.kind)) + " saves nothing: it is already 16-bit");
      return std::make_unique<QuantizedChunksFor<float>>(plan, dtype, spec);
    default:
      throw Error(Errc::invalid_argument, std::string("quantization applies to float data, not ") +
                                              std::string(dtype_name(dtype)));
  }
}

}  // namespace ferry::peer
