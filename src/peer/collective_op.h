// What every collective in flight has in common: the handshake with the
// master, deadlines, and holds on the caller's buffers.
//
//   issued (begin sent) -> running (the master's go or plan)
//   -> locally done (end(ok) sent) -> verdict (the master's, the same for
//   every member: committed or aborted) -> finished (nothing touches the
//   caller's buffers any more; wait() returns).
// A local failure (dead link, corrupt data, deadline) sends end(failure) so
// the master aborts the collective for everyone; a running collective that
// fails stops its transfers (stop_transfers), since they stopped mid-stream.
//
// Holds: every transfer touching the caller's memory counts as a hold; the
// collective finishes only at zero holds, so the caller may free its buffers
// the moment wait() returns, even after a failure. A hold taken after the
// verdict is refused (see try_hold).
//
// Threading: every public call from any thread; the mutex guards the phase.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "core/buffer_pool.h"
#include "core/error.h"
#include "core/wait_notice.h"
#include "wire/messages.h"

namespace ferry::peer {

using Clock = std::chrono::steady_clock;

struct OpDeadlines {
  std::chrono::milliseconds start{60'000};     // begin -> go
  std::chrono::milliseconds progress{20'000};  // running without a byte moving
  std::chrono::milliseconds verdict{60'000};   // end -> verdict (twice this when it is late: see check_deadlines)
  // wait_finished's last resort, past every deadline above: turns a bug into an error, not a hang.
  std::chrono::milliseconds bug_margin{30'000};
};

// Where a finished collective's time went, phase by phase, to hold against its deadlines.
struct OpTimeline {
  double start_s = 0;          // the call -> the master's go (or this peer's failure before it)
  double longest_stall_s = 0;  // the longest stretch of the transfer without progress (as the watchdog saw it)
  double commit_s = 0;         // this peer's end -> the verdict; 0 when no end was sent
  double duration_s = 0;       // the call -> finished
};

// What a collective needs from its communicator (op_registry.h): a way to the
// master, and the registry that owns its life cycle (started, finished).
class OpHost {
 public:
  virtual ~OpHost() = default;
  virtual void send_end(uint64_t epoch, uint32_t seq, const Status& status) = 0;
  // Chunks for this collective may now be consumed.
  virtual void op_started(uint32_t seq) = 0;
  virtual void op_finished(uint32_t seq) = 0;
  // Scratch buffers reused across this host's collectives (null: none).
  virtual BufferPool* scratch_pool() { return nullptr; }
};

class CollectiveOp {
 public:
  CollectiveOp(OpHost& host, uint64_t epoch, uint32_t seq, OpDeadlines deadlines);
  virtual ~CollectiveOp() = default;

  uint32_t seq() const { return seq_; }
  uint64_t epoch() const { return epoch_; }
  // The master's start signals; a kind that gets the other one fails (protocol).
  virtual void go();
  virtual void plan(const wire::SyncPlan& plan);
  virtual void gather_go(const wire::GatherGo& go);
  void verdict(const Status& verdict);
  // The master's answer to our request for a late verdict: the others still run
  // (wire::CollectivePending). The verdict deadline starts again.
  void still_pending();
  // A failure on this side; when `final` no verdict can come (master lost).
  void fail_local(const Status& why, bool final = false);
  // Gives up on a collective the master has not started yet (so no data
  // moved): the master aborts it for everyone. False once it has started.
  bool cancel_if_not_started(const Status& why);
  void check_deadlines(Clock::time_point now);
  bool finished() const;
  // Ended ok here and waits for the master's verdict: the master may have
  // committed it, so losing the master must not abort it (communicator.h).
  bool awaiting_verdict() const;

 protected:
  // issued -> running; false when it already failed (a late go is ignored).
  bool begin_running();
  // Lets chunks that arrived for this collective in (OpHost::op_started).
  void accept_chunks() { host_.op_started(seq_); }
  // running -> locally done; sends end(ok) once.
  void mark_local_done();
  bool try_hold();
  void release();
  void progressed() { last_progress_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
  // Blocks until finished; the verdict (or the final local failure).
  Status wait_finished();
  OpTimeline timeline() const;
  // From the master's go to this peer's end(ok): the time its data moved; nullopt unless both happened.
  std::optional<double> transfer_seconds() const;

  // The call that issued it, as notices name it ("all_reduce").
  virtual const char* call_name() const { return "collective"; }
  // A running collective failed or was aborted: stop its transfers now.
  virtual void stop_transfers(const Status& why) = 0;
  // The master's verdict arrived (after stop_transfers for an abort). No lock held.
  virtual void on_verdict(const Status&) {}

 private:
  enum class Phase { issued, running, local_done, finished };
  void maybe_finish(std::unique_lock<std::mutex>& lock);
  void note_stall(Clock::time_point now);  // mu_ held, phase running
  // The warning a wait past 5 s gets (core/wait_notice.h), when one is due. mu_ held.
  std::optional<std::string> wait_notice(Clock::time_point now, Clock::time_point last_progress);
  Clock::time_point last_progress() const {
    return Clock::time_point(Clock::duration(last_progress_ns_.load(std::memory_order_relaxed)));
  }

  OpHost& host_;
  const uint64_t epoch_;
  const uint32_t seq_;
  const OpDeadlines deadlines_;
  const Clock::time_point issued_at_ = Clock::now();
  std::atomic<int64_t> holds_{0};
  std::atomic<bool> io_closed_{false};  // set once a verdict is in: no new holds
  std::atomic<int64_t> last_progress_ns_{0};

  mutable std::mutex mu_;
  std::condition_variable finished_cv_;
  Phase phase_ = Phase::issued;           // guarded by mu_
  bool end_sent_ = false;                 // guarded by mu_
  bool ended_ok_ = false;                 // guarded by mu_; the end sent was end(ok)
  Clock::time_point end_sent_at_;         // guarded by mu_
  // The verdict was late: we asked the master to abort (end(failure)) and wait
  // for its verdict, which may still be a commit that won the race.
  std::optional<Clock::time_point> abort_asked_at_;  // guarded by mu_
  std::optional<Status> local_failure_;   // guarded by mu_
  std::optional<Status> verdict_;         // guarded by mu_
  std::optional<Clock::time_point> went_at_, verdict_at_;  // guarded by mu_
  OpTimeline timeline_;                   // guarded by mu_; complete once finished
  std::optional<WaitNotice> notice_;      // guarded by mu_; of the wait that began at notice_since_
  Clock::time_point notice_since_;        // guarded by mu_
};

}  // namespace ferry::peer
