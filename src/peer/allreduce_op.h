// One all-reduce in flight: the pipelined ring of ring_plan.h driven by lane
// events, plus the begin/go/end/verdict handshake with the master.
//
// Life of an operation:
//   issued (begin sent) -> running (master's go: step-0 chunks queued)
//   -> locally done (every unit received and sent; end(ok) sent)
//   -> verdict (master: committed or aborted, the same for every member)
//   -> finished (no I/O touches the caller's buffers any more).
// A local failure (dead link, corrupt chunk, deadline) sends end(failure) so
// the master aborts the operation for everyone; a running operation that fails
// closes its links, since they stopped mid-stream.
//
// Holds: every queued send and every accepted read counts as a hold; the
// operation finishes only at zero holds, so its caller may free the buffers
// the moment wait() returns, even after a failure.
//
// Threading: go/verdict/fail_local/check_deadlines from any thread; lane
// callbacks on lane strands, concurrently (they touch disjoint chunks;
// counters are atomic). The mutex guards the phase fields.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "core/dtype.h"
#include "peer/chunk_consumer.h"
#include "peer/ring_links.h"
#include "peer/ring_plan.h"

namespace ferry::peer {

using Clock = std::chrono::steady_clock;

struct AllreduceSpec {
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  uint64_t tag = 0;
};

struct OpInfo {
  uint32_t world_size = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  double duration_s = 0;
};

struct OpDeadlines {
  std::chrono::milliseconds start{60'000};     // begin -> go
  std::chrono::milliseconds progress{20'000};  // running without a byte moving
  std::chrono::milliseconds verdict{60'000};   // end -> verdict
};

// What an operation needs from its communicator.
class OpHost {
 public:
  virtual ~OpHost() = default;
  virtual void send_end(uint64_t epoch, uint32_t seq, const Status& status) = 0;
  virtual void op_finished(uint32_t seq) = 0;
};

class AllreduceOp final : public ChunkConsumer, public std::enable_shared_from_this<AllreduceOp> {
 public:
  AllreduceOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links, RingPlan plan,
              const void* send, void* recv, size_t count, AllreduceSpec spec, OpDeadlines deadlines);

  uint32_t seq() const { return seq_; }
  void go();
  void verdict(const Status& verdict);
  // A failure on this side; when `final` no verdict can come (master lost).
  void fail_local(const Status& why, bool final = false);
  // Gives up on an operation the master has not started yet (so no data
  // moved): the master aborts it for everyone. False once it has started.
  bool cancel_if_not_started(const Status& why);
  void check_deadlines(Clock::time_point now);

  bool finished() const;
  // Blocks until finished; the result is the master's verdict (or the final local failure).
  Status wait(OpInfo* info);

  // ChunkConsumer
  Status payload_destination(const wire::ChunkHeader& header, uint32_t lane, std::vector<uint8_t>& staging,
                             uint8_t*& destination) override;
  Status payload_received(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) override;
  void payload_abandoned() override { release(); }
  void chunk_sent(size_t bytes) override;
  void chunk_dropped() override { release(); }
  void links_failed(const Status& why) override { fail_local(why); }

 private:
  enum class Phase { issued, running, local_done, finished };

  uint8_t* recv_at(size_t element) const { return recv_ + element * plan_.elem_size(); }
  const uint8_t* send_at(size_t element) const { return send_ + element * plan_.elem_size(); }
  // nullopt: the lane hashes the payload when it writes it.
  bool queue_send(uint32_t unit, const uint8_t* data, std::optional<uint64_t> checksum);
  bool try_hold();
  void run_locally();  // a world of one, or nothing to reduce
  void progressed() { last_progress_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
  void count_done_unit();
  void release();
  void maybe_finish(std::unique_lock<std::mutex>& lock);

  OpHost& host_;
  const uint64_t epoch_;
  const uint32_t seq_;
  const std::shared_ptr<RingLinks> links_;
  const RingPlan plan_;
  const uint8_t* const send_;
  uint8_t* const recv_;
  const size_t count_;
  const AllreduceSpec spec_;
  const OpDeadlines deadlines_;
  const Clock::time_point issued_at_ = Clock::now();
  const uint32_t done_target_;  // received + sent units when locally done

  // Hot path, lock-free:
  std::unique_ptr<std::atomic<uint8_t>[]> received_;  // per unit: arrived already?
  std::atomic<uint32_t> units_done_{0};
  std::atomic<int64_t> holds_{0};
  std::atomic<bool> io_closed_{false};  // set once a verdict is in: no new holds
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0};
  std::atomic<int64_t> last_progress_ns_{0};

  mutable std::mutex mu_;
  std::condition_variable finished_cv_;
  Phase phase_ = Phase::issued;           // guarded by mu_
  bool end_sent_ = false;                 // guarded by mu_
  Clock::time_point end_sent_at_;         // guarded by mu_
  std::optional<Status> local_failure_;   // guarded by mu_
  std::optional<Status> verdict_;         // guarded by mu_
  double duration_s_ = 0;                 // guarded by mu_
};

}  // namespace ferry::peer
