// Communicator::all_gather_async: issued like an all-reduce (one snapshot of
// the ring with the issue, begin to the master, end released after it); the
// master's gather_go then carries every member's size (peer/gather_op.h).
#include "peer/communicator.h"

namespace ferry::peer {

std::shared_ptr<GatherOp> Communicator::all_gather_async(const void* send, size_t bytes, uint64_t tag,
                                                         std::shared_ptr<GatheredBytes> result) {
  std::shared_ptr<GatherOp> op;
  std::optional<Status> no_master;
  {
    std::lock_guard lock(state_.mu);  // with the ring and the issue: one snapshot (communicator.h)
    no_master = state_.master_away("all_gather");
    if (!no_master) state_.require_accepted("all_gather");
    auto view = membership_.view();
    GatherSpec spec{.tag = tag,
                    .world = static_cast<uint32_t>(view.ring.size()),
                    .rank = view.rank,
                    .lanes = view.lanes,
                    .max_chunk_bytes = config_.max_chunk_bytes};
    op = ops_->issue<GatherOp>(
        [&](uint64_t epoch, uint32_t seq) {
          return std::make_shared<GatherOp>(*ops_, epoch, seq, view.links, spec, send, bytes, result,
                                            op_deadlines());
        },
        view.links.get());
  }
  begin_issued(*op, no_master, [&] {
    session_.send(wire::CollectiveBegin{.epoch = op->epoch(),
                                        .seq = op->seq(),
                                        .kind = static_cast<uint8_t>(wire::CollectiveKind::all_gather),
                                        .tag = tag,
                                        .count = bytes});
  });
  return op;
}

}  // namespace ferry::peer
