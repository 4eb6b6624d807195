#include "peer/quantized_chunks.h"

#include "core/reduce.h"
#include "peer/int_quant_chunks.h"
#include "peer/quantized_chunks_base.h"

namespace ferry::peer {
namespace {

// Per-hop codecs (quantized_chunks.h). T: the accumulation type.
template <class T>
class PerHopChunks final : public QuantizedChunksBase<T> {
  using Base = QuantizedChunksBase<T>;
  using typename Base::Scratch;
  using Base::plan_;
  using Base::op_;

 public:
  PerHopChunks(const RingPlan& plan, DType dtype, ReduceOp op, QuantSpec spec, QuantizedBuffers buffers)
      : Base(plan, dtype, op, buffers), spec_(spec) {
    this->allocate_slots();
  }

  size_t wire_bytes(uint32_t /*step*/, size_t count) const override { return quant_encoded_bytes<T>(spec_, count); }

  void encode_own(uint32_t lane, uint32_t unit) override {
    ElementRange r = plan_.send_range(unit);
    quant_encode<T>(spec_, this->input(this->scratch(lane), r), r.count, this->slot(unit));
  }

  Status hop(uint32_t lane, uint32_t unit, const uint8_t* in, size_t in_bytes) override {
    Scratch& s = this->scratch(lane);
    ElementRange r = plan_.recv_range(unit);
    const T* local = this->input(s, r);
    uint8_t* out = this->slot(unit + plan_.chunks_per_segment());
    if (op_ == ReduceOp::sum || op_ == ReduceOp::avg)  // the hot path, fused in L1
      return quant_decode_add_encode<T>(spec_, in, in_bytes, local, r.count, out);
    if (Status st = combine(s, in, in_bytes, local, r.count); !st.ok()) return st;
    quant_encode<T>(spec_, s.acc.data(), r.count, out);
    return Status::success();
  }

  Status finish_owner(uint32_t lane, uint32_t unit, const uint8_t* in, size_t in_bytes) override {
    Scratch& s = this->scratch(lane);
    ElementRange r = plan_.recv_range(unit);
    uint32_t next = unit + plan_.chunks_per_segment();
    if (Status st = combine(s, in, in_bytes, this->input(s, r), r.count); !st.ok()) return st;
    if (op_ == ReduceOp::avg) finalize_avg(Base::acc_dtype(), s.acc.data(), r.count, plan_.world());
    quant_encode<T>(spec_, s.acc.data(), r.count, this->slot(next));
    // The owner keeps what everyone else gets: the decode of the bytes it sends.
    return deliver(lane, unit, this->slot(next), wire_bytes(0, r.count));
  }

  Status deliver(uint32_t lane, uint32_t unit, const uint8_t* bytes, size_t size) override {
    Scratch& s = this->scratch(lane);
    ElementRange r = plan_.recv_range(unit);
    if (Status st = quant_decode<T>(spec_, bytes, size, r.count, this->result_buffer(s, r)); !st.ok()) return st;
    this->store_result(s, r);
    return Status::success();
  }

 private:
  // s.acc = decode(in) op local, in T.
  Status combine(Scratch& s, const uint8_t* in, size_t in_bytes, const T* local, size_t count) {
    if (op_ == ReduceOp::sum || op_ == ReduceOp::avg)
      return quant_decode_add<T>(spec_, in, in_bytes, local, count, s.acc.data());
    if (Status st = quant_decode<T>(spec_, in, in_bytes, count, s.acc.data()); !st.ok()) return st;
    reduce(Base::acc_dtype(), op_, s.acc.data(), s.acc.data(), local, count);
    return Status::success();
  }

  const QuantSpec spec_;
};

}  // namespace

namespace {
template <class T>
std::unique_ptr<QuantizedChunks> make_chunks(const RingPlan& plan, DType dtype, ReduceOp op, QuantSpec spec,
                                             QuantizedBuffers buffers) {
  if (quant_is_int_domain(spec.kind)) return make_int_domain_chunks<T>(plan, dtype, op, spec, buffers);
  return std::make_unique<PerHopChunks<T>>(plan, dtype, op, spec, buffers);
}
}  // namespace

std::unique_ptr<QuantizedChunks> QuantizedChunks::create(const RingPlan& plan, DType dtype, ReduceOp op, QuantSpec spec,
                                                         QuantizedBuffers buffers) {
  if (!quant_spec_valid(spec))
    throw Error(Errc::invalid_argument, "quantization block must be 1.." + std::to_string(kMaxQuantBlock));
  bool half_wire = spec.kind == Quant::f16 || spec.kind == Quant::bf16;
  switch (dtype) {
    case DType::f32:
      return make_chunks<float>(plan, dtype, op, spec, buffers);
    case DType::f64:
      return make_chunks<double>(plan, dtype, op, spec, buffers);
    case DType::f16:
    case DType::bf16:
      if (half_wire)
        throw Error(Errc::invalid_argument, std::string("quantizing ") + std::string(dtype_name(dtype)) + " data to " +
                                                std::string(quant_name(spec.kind)) + " saves nothing: it is already 16-bit");
      return make_chunks<float>(plan, dtype, op, spec, buffers);
    default:
      throw Error(Errc::invalid_argument, std::string("quantization applies to float data, not ") +
                                              std::string(dtype_name(dtype)));
  }
}

}  // namespace ferry::peer
