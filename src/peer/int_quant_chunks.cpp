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
        own_(int_quant_block_count(spec, count)), agreed_(own_.size()), chunks_(plan.chunks_per_segment()) {
    // Chunk index c's blocks: those of chunk c of every segment (the plan is
    // aligned to blocks, so no block is in two chunks).
    for (uint32_t c = 0; c < plan_.chunks_per_segment(); ++c) {
      ChunkScales& cs = chunks_[c];
      for (uint32_t seg = 0; seg < plan_.world(); ++seg) {
        ElementRange r = plan_.chunk(seg, c);
        if (r.count == 0) continue;
        size_t first = r.begin / spec_.block, end = (r.begin + r.count + spec_.block - 1) / spec_.block;
        cs.pieces.push_back({first, end - first});
        cs.blocks += end - first;
      }
      // Steps 0 .. N-2: what this rank sends at each.
      cs.steps.resize(static_cast<size_t>(agreement_steps()) * cs.blocks);
    }
    this->allocate_slots();
  }

  uint32_t agreement_steps() const override { return plan_.world() - 1; }
  size_t agreement_bytes(uint32_t chunk) const override { return chunks_[chunk].blocks * sizeof(T); }

  void begin_agreement() override {
    std::fill(own_.begin(), own_.end(), T(0));
    // Tile by tile, so 16-bit data widens through the starting scratch.
    Scratch& s = this->scratch(QuantizedChunks::kStartLane);
    const size_t tile = std::max<size_t>(this->max_chunk_, 1);
    for (size_t begin = 0; begin < count_; begin += tile) {
      ElementRange r{begin, std::min(tile, count_ - begin)};
      int_quant_absmax(spec_, this->input(r, s.local.empty() ? nullptr : s.local.data()), r.count, r.begin,
                       own_.data());
    }
    for (ChunkScales& cs : chunks_) {
      T* out = cs.steps.data();
      for (const Piece& p : cs.pieces) out = std::copy_n(own_.begin() + static_cast<std::ptrdiff_t>(p.first), p.blocks, out);
    }
  }

  const uint8_t* agreement_own(uint32_t chunk) override {
    return reinterpret_cast<const uint8_t*>(chunks_[chunk].steps.data());
  }

  const uint8_t* agreement_received(uint32_t step, uint32_t chunk, const uint8_t* in) override {
    // Step t + 1 sends max(own, what step t brought); after the last step that
    // is every rank's max, which lands in the agreed array at this chunk's blocks.
    ChunkScales& cs = chunks_[chunk];
    const bool last = step + 1 == agreement_steps();
    T* forward = last ? nullptr : cs.steps.data() + (step + 1) * cs.blocks;
    size_t offset = 0;
    for (const Piece& p : cs.pieces) {
      T* out = last ? agreed_.data() + p.first : forward + offset;
      std::memcpy(out, in + offset * sizeof(T), p.blocks * sizeof(T));  // `in` may be unaligned staging
      int_quant_merge_absmax(out, own_.data() + p.first, p.blocks);
      offset += p.blocks;
    }
    return reinterpret_cast<const uint8_t*>(forward);
  }

  size_t wire_bytes(uint32_t step, size_t count) const override {
    return int_quant_packed_bytes(spec_, count, contributors(step));
  }

  void encode_own(uint32_t lane, uint32_t unit) override {
    ElementRange r = plan_.send_range(unit);
    Scratch& s = this->scratch(lane);
    int_quant_encode(spec_, contributor_, agreed_.data(), r.begin, this->input(s, r), r.count, this->slot(unit));
  }

  Status hop(uint32_t lane, uint32_t unit, const uint8_t* in, size_t in_bytes) override {
    Scratch& s = this->scratch(lane);
    ElementRange r = plan_.recv_range(unit);
    return int_quant_encode_add(spec_, contributor_, agreed_.data(), r.begin, this->input(s, r), r.count, in, in_bytes,
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
    Status st = int_quant_decode(spec_, agreed_.data(), r.begin, bytes, size, plan_.world(), op_, r.count,
                                 this->result_buffer(s, r));
    if (st.ok()) this->store_result(s, r);
    return st;
  }

 private:
  // Contributions in a unit of ring step `step`: one more each reduce-scatter
  // step, all of them in the all-gather.
  uint32_t contributors(uint32_t step) const { return plan_.is_reduce_step(step) ? step + 1 : plan_.world(); }
  const IntQuantSpec spec_;
  const uint64_t contributor_;
  const size_t count_;
  struct Piece {
    size_t first, blocks;  // a run of the tensor's blocks
  };
  struct ChunkScales {
    std::vector<Piece> pieces;  // chunk c's blocks in each segment, in segment order
    size_t blocks = 0;          // over every piece: the values of one agreement message
    std::vector<T> steps;       // the message this rank sends at each step
  };
  std::vector<T> own_;     // this rank's maxima, by block; read-only after begin_agreement
  std::vector<T> agreed_;  // the agreed maxima, by block: chunk c's written once, when it is agreed
  std::vector<ChunkScales> chunks_;
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
  if (plan.align() % spec.block != 0)
    throw Error(Errc::invalid_argument, "the ring plan is not aligned to the quantization's blocks of " +
                                            std::to_string(spec.block) + " elements");
  size_t count = 0;
  for (uint32_t seg = 0; seg < plan.world(); ++seg) count += plan.segment(seg).count;
  return std::make_unique<IntDomainChunks<T>>(plan, dtype, op, int_quant_spec(spec, buffers.seed), buffers, count);
}

template std::unique_ptr<QuantizedChunks> make_int_domain_chunks<float>(const RingPlan&, DType, ReduceOp, QuantSpec,
                                                                        QuantizedBuffers);
template std::unique_ptr<QuantizedChunks> make_int_domain_chunks<double>(const RingPlan&, DType, ReduceOp, QuantSpec,
                                                                         QuantizedBuffers);

}  // namespace ferry::peer
