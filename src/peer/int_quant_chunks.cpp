#include "peer/int_quant_chunks.h"

#include <cstring>
#include <string>

#include "core/int_quant.h"
#include "peer/quantized_chunks_base.h"

namespace ferry::peer {
namespace {

template <class T>
class IntDomainChunks final : public QuantizedChunksBase<T> {
  using Base = QuantizedChunksBase<T>;
  using typename Base::Scratch;
  using Base::plan_;
  using Base::op_;

 public:
  IntDomainChunks(const RingPlan& plan, DType dtype, ReduceOp op, IntQuantSpec spec, QuantizedBuffers buffers,
                  size_t count)
      : Base(plan, dtype, op, buffers), spec_(spec), contributor_(buffers.contributor), count_(count),
        blocks_(int_quant_block_count(spec, count)),
        // Step t's bytes (t = 0: this rank's own maxima), then the agreed scales.
        scales_(static_cast<size_t>(plan.world()) * blocks_) {
    this->allocate_slots();
  }

  uint32_t agreement_steps() const override { return plan_.world() - 1; }
  size_t agreement_bytes() const override { return blocks_ * sizeof(T); }

  const uint8_t* begin_agreement() override {
    T* own = step_scales(0);
    std::fill(own, own + blocks_, T(0));
    // Tile by tile, so 16-bit data widens through the starting scratch.
    Scratch& s = this->scratch(Base::kStartScratch);
    const size_t tile = std::max<size_t>(this->max_chunk_, 1);
    for (size_t begin = 0; begin < count_; begin += tile) {
      ElementRange r{begin, std::min(tile, count_ - begin)};
      int_quant_absmax(spec_, this->input(r, s.local.empty() ? nullptr : s.local.data()), r.count, r.begin, own);
    }
    return reinterpret_cast<const uint8_t*>(own);
  }

  const uint8_t* agreement_received(uint32_t step, const uint8_t* in) override {
    // Step t + 1 sends max(own, what step t brought); after the last step that is every rank's max.
    T* out = step + 1 < agreement_steps() ? step_scales(step + 1) : agreed();
    std::memcpy(out, in, agreement_bytes());  // `in` may be unaligned staging
    int_quant_merge_absmax(out, step_scales(0), blocks_);
    return out == agreed() ? nullptr : reinterpret_cast<const uint8_t*>(out);
  }

  size_t wire_bytes(uint32_t step, size_t count) const override {
    return int_quant_packed_bytes(spec_, count, contributors(step));
  }

  void encode_own(uint32_t unit) override {
    ElementRange r = plan_.send_range(unit);
    Scratch& s = this->scratch(Base::kStartScratch);
    int_quant_encode(spec_, contributor_, agreed(), r.begin, this->input(s, r), r.count, this->slot(unit));
  }

  Status hop(uint32_t lane, uint32_t unit, const uint8_t* in, size_t in_bytes) override {
    Scratch& s = this->scratch(lane);
    ElementRange r = plan_.recv_range(unit);
    return int_quant_encode_add(spec_, contributor_, agreed(), r.begin, this->input(s, r), r.count, in, in_bytes,
                                contributors(plan_.step_of(unit)), this->slot(unit + plan_.chunks_per_segment()));
  }

  Status finish_owner(uint32_t lane, uint32_t unit, const uint8_t* in, size_t in_bytes) override {
    if (Status st = hop(lane, unit, in, in_bytes); !st.ok()) return st;
    uint32_t next = unit + plan_.chunks_per_segment();
    // The owner decodes the very sum it sends, as every other peer will.
    return deliver(lane, unit, this->slot(next), wire_bytes(plan_.step_of(next), plan_.recv_range(unit).count));
  }

  Status deliver(uint32_t lane, uint32_t unit, const uint8_t* bytes, size_t size) override {
    Scratch& s = this->scratch(lane);
    ElementRange r = plan_.recv_range(unit);
    Status st = int_quant_decode(spec_, agreed(), r.begin, bytes, size, plan_.world(), op_, r.count,
                                 this->result_buffer(s, r));
    if (st.ok()) this->store_result(s, r);
    return st;
  }

 private:
  // Contributions in a unit of ring step `step`: one more each reduce-scatter
  // step, all of them in the all-gather.
  uint32_t contributors(uint32_t step) const { return plan_.is_reduce_step(step) ? step + 1 : plan_.world(); }
  T* step_scales(uint32_t step) { return scales_.data() + step * blocks_; }
  T* agreed() { return step_scales(agreement_steps()); }

  const IntQuantSpec spec_;
  const uint64_t contributor_;
  const size_t count_;
  const size_t blocks_;
  std::vector<T> scales_;
};

}  // namespace

template <class T>
std::unique_ptr<QuantizedChunks> make_int_domain_chunks(const RingPlan& plan, DType dtype, ReduceOp op, QuantSpec spec,
                                                        QuantizedBuffers buffers) {
  if (op != ReduceOp::sum && op != ReduceOp::avg)
    throw Error(Errc::invalid_argument, std::string(quant_name(spec.kind)) + " sums integers: it takes op sum or avg, not " +
                                            std::string(reduce_op_name(op)));
  if (plan.world() > kMaxIntQuantGroup)
    throw Error(Errc::invalid_argument, std::string(quant_name(spec.kind)) + " carries at most " +
                                            std::to_string(kMaxIntQuantGroup) + " peers' sums exactly; this group has " +
                                            std::to_string(plan.world()));
  size_t count = 0;
  for (uint32_t seg = 0; seg < plan.world(); ++seg) count += plan.segment(seg).count;
  return std::make_unique<IntDomainChunks<T>>(plan, dtype, op, int_quant_spec(spec, buffers.seed), buffers, count);
}

template std::unique_ptr<QuantizedChunks> make_int_domain_chunks<float>(const RingPlan&, DType, ReduceOp, QuantSpec,
                                                                        QuantizedBuffers);
template std::unique_ptr<QuantizedChunks> make_int_domain_chunks<double>(const RingPlan&, DType, ReduceOp, QuantSpec,
                                                                         QuantizedBuffers);

}  // namespace ferry::peer
