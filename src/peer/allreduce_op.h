// One all-reduce in flight: the pipelined ring of ring_plan.h driven by lane
// events; its handshake with the master and its holds are CollectiveOp's,
// its counting RingTransferOp's.
// The integer-domain modes agree their scales chunk by chunk
// (quantized_chunks.h): unit plan.units() + t * chunks_per_segment + c
// carries agreement step t of chunk index c, and chunk c's ring starts when
// its last step is in. A neighbour that got there first may send chunk c's
// ring units before then; they wait, copied, until this rank agreed chunk c.
//
// Threading: lane callbacks run on lane threads, concurrently (they touch
// disjoint chunks).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "core/dtype.h"
#include "core/quant.h"
#include "peer/quantized_chunks.h"
#include "peer/ring_plan.h"
#include "peer/ring_transfer_op.h"
#include "wire/messages.h"

namespace ferry::peer {

struct AllreduceSpec {
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  uint64_t tag = 0;
  QuantSpec quant;  // Quant::none: the data type itself crosses the wire
  // barrier: count 0; broadcast: u8 sum in place, every rank but `root` contributing zeros.
  wire::CollectiveKind kind = wire::CollectiveKind::allreduce;
  uint32_t root = 0;
  // This peer's id: its stochastic rounding stream in the integer-domain modes (core/int_quant.h).
  uint64_t contributor = 0;
};

class AllreduceOp final : public RingTransferOp {
 public:
  AllreduceOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links, RingPlan plan,
              const void* send, void* recv, size_t count, AllreduceSpec spec, OpDeadlines deadlines);

  void go() override;
  // Blocks until finished; the result is the master's verdict (or the final local failure).
  Status wait(OpInfo* info);

  // ChunkConsumer
  Status payload_destination(const wire::ChunkHeader& header, uint32_t lane, std::vector<uint8_t>& staging,
                             uint8_t*& destination) override;
  Status payload_received(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) override;

 private:
  const char* call_name() const override {
    switch (spec_.kind) {
      case wire::CollectiveKind::barrier: return "barrier";
      case wire::CollectiveKind::broadcast: return "broadcast";
      default: return "all_reduce";
    }
  }
  uint8_t* recv_at(size_t element) const { return recv_ + element * plan_.elem_size(); }
  const uint8_t* send_at(size_t element) const { return send_ + element * plan_.elem_size(); }
  size_t wire_bytes(uint32_t step, size_t count) const {
    return quant_ ? quant_->wire_bytes(step, count) : count * plan_.elem_size();
  }
  Status receive_quantized(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload);
  // Step 0 of chunk index c: this rank's own segment's chunk c, from `lane`'s thread.
  void start_chunk(uint32_t lane, uint32_t chunk);
  uint32_t agreement_steps() const { return quant_ ? quant_->agreement_steps() : 0; }
  uint32_t agreement_units() const { return agreement_steps() * plan_.chunks_per_segment(); }
  // Agreement units that carry bytes, sent and received: every step of every non-empty chunk index.
  uint32_t agreement_transfers() const;
  // A scale agreement unit: folds it in; a chunk's last one starts its ring and its units that waited.
  Status receive_agreement(uint32_t agreement_unit, uint32_t lane, const uint8_t* payload);
  // A ring chunk, with one hold that these release on success (the caller on failure):
  // kept as a copy while the scales are still being agreed, else consumed.
  Status consume_or_keep(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload);
  Status consume(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload);
  void run_locally();  // a world of one, or nothing to reduce

  const RingPlan plan_;
  const uint8_t* const send_;
  uint8_t* const recv_;
  const size_t count_;
  const AllreduceSpec spec_;
  std::unique_ptr<QuantizedChunks> quant_;  // set when a codec carries the data

  struct KeptChunk {
    wire::ChunkHeader header;
    std::vector<uint8_t> payload;
  };
  std::mutex agreement_mu_;
  // Per chunk index: its scales are agreed (set under agreement_mu_; true from the start
  // without an agreement), and the ring units that came before (guarded by agreement_mu_).
  std::unique_ptr<std::atomic<bool>[]> chunk_agreed_;
  std::vector<std::vector<KeptChunk>> kept_;

  std::unique_ptr<std::atomic<uint8_t>[]> received_;  // per unit: arrived already?
  std::atomic<int64_t> went_ns_{0}, agreed_ns_{0};  // steady clock, for OpInfo::agreement_s
};

}  // namespace ferry::peer
