#include "peer/collective_op.h"

#include <algorithm>

#include "core/duration_text.h"
#include "core/log.h"

namespace ferry::peer {

CollectiveOp::CollectiveOp(OpHost& host, uint64_t epoch, uint32_t seq, OpDeadlines deadlines)
    : host_(host), epoch_(epoch), seq_(seq), deadlines_(deadlines) {
  progressed();
}

void CollectiveOp::go() {
  fail_local(Status::failure(Errc::protocol, "the master started collective " + std::to_string(seq_) +
                                                 " as an all-reduce, but it is not one"));
}

void CollectiveOp::plan(const wire::SyncPlan&) {
  fail_local(Status::failure(Errc::protocol, "the master sent a shared-state plan for collective " +
                                                 std::to_string(seq_) + ", which is not a sync"));
}

void CollectiveOp::gather_go(const wire::GatherGo&) {
  fail_local(Status::failure(Errc::protocol, "the master started collective " + std::to_string(seq_) +
                                                 " as an all-gather, but it is not one"));
}

bool CollectiveOp::begin_running() {
  {
    std::lock_guard lock(mu_);
    if (phase_ != Phase::issued || local_failure_ || verdict_) return false;
    phase_ = Phase::running;
    went_at_ = Clock::now();
  }
  progressed();
  return true;
}

void CollectiveOp::mark_local_done() {
  {
    std::lock_guard lock(mu_);
    if (phase_ != Phase::running || local_failure_) return;
    end_sent_at_ = Clock::now();
    note_stall(end_sent_at_);
    phase_ = Phase::local_done;
    end_sent_ = true;
    ended_ok_ = true;
  }
  host_.send_end(epoch_, seq_, Status::success());
}

void CollectiveOp::verdict(const Status& verdict) {
  std::unique_lock lock(mu_);
  if (verdict_ || phase_ == Phase::finished) return;
  verdict_ = verdict;
  verdict_at_ = Clock::now();
  bool stop = !verdict.ok() && phase_ == Phase::running;
  lock.unlock();
  if (stop) stop_transfers(Status::failure(verdict.code, "collective aborted: " + verdict.message));
  on_verdict(verdict);
  lock.lock();
  maybe_finish(lock);
}

void CollectiveOp::fail_local(const Status& why, bool final) {
  bool tell_master = false, stop = false, concluded = false;
  std::unique_lock lock(mu_);
  if (phase_ == Phase::finished) return;
  auto now = Clock::now();
  if (final && !verdict_) {
    verdict_ = why;
    verdict_at_ = now;
    concluded = true;
  }
  if (!local_failure_) {
    local_failure_ = why;
    stop = phase_ == Phase::running;
    if (stop) note_stall(now);
    if (!end_sent_) {
      end_sent_ = true;
      end_sent_at_ = now;
      tell_master = !final;
    }
  }
  lock.unlock();
  if (stop) stop_transfers(why);
  if (tell_master) host_.send_end(epoch_, seq_, why);
  if (concluded) on_verdict(why);
  lock.lock();
  maybe_finish(lock);
}

bool CollectiveOp::cancel_if_not_started(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (phase_ != Phase::issued || local_failure_ || verdict_) return false;
  }
  fail_local(why);  // the phase stays `issued`: a late go is ignored, no transfer is touched
  return true;
}

std::optional<std::string> CollectiveOp::wait_notice(Clock::time_point now, Clock::time_point last_progress) {
  enum class Wait { start, progress, verdict };
  Wait wait = Wait::start;
  Clock::time_point since;
  if (phase_ == Phase::issued && !local_failure_) {
    wait = Wait::start, since = issued_at_;
  } else if (phase_ == Phase::running && !local_failure_) {
    wait = Wait::progress, since = last_progress;
  } else if (end_sent_ && ended_ok_ && !verdict_ && !abort_asked_at_) {
    wait = Wait::verdict, since = std::max(end_sent_at_, last_progress);
  } else {
    return std::nullopt;
  }
  if (!notice_ || notice_since_ != since) notice_.emplace(since), notice_since_ = since;
  auto waited = notice_->due(now);
  if (!waited) return std::nullopt;
  auto left = [&](std::chrono::milliseconds bound) { return seconds_text(std::max(bound - *waited, bound * 0)); };
  const std::string op = std::string(call_name()) + " (collective " + std::to_string(seq_) + " of epoch " +
                         std::to_string(epoch_) + ")";
  switch (wait) {
    case Wait::start:
      return op + " not started after " + seconds_text(*waited) +
             ": the master starts it once every member of the group has called it (the same calls in the same "
             "order on every member); it fails in " + left(deadlines_.start) + " (timeout_ms)";
    case Wait::progress:
      return op + " moved no data for " + seconds_text(*waited) +
             ": it waits for its ring neighbours' bytes (a stalled link, or a peer stopped or overloaded); it fails "
             "in " + left(deadlines_.progress) + " (progress_timeout_ms) unless data moves";
    case Wait::verdict:
      return op + " finished here " + seconds_text(*waited) +
             " ago and waits for the master's verdict, which comes once every other member has finished its part; "
             "in " + left(deadlines_.verdict) + " it asks the master to abort it";
  }
  return std::nullopt;
}

void CollectiveOp::check_deadlines(Clock::time_point now) {
  std::unique_lock lock(mu_);
  if (phase_ == Phase::finished) return;
  auto last_progress = this->last_progress();
  if (phase_ == Phase::running && !local_failure_) note_stall(now);
  if (auto notice = wait_notice(now, last_progress)) {
    lock.unlock();
    log().warn("{}", *notice);
    lock.lock();
    if (phase_ == Phase::finished) return;
    last_progress = this->last_progress();
  }
  // Counted from the later of our end and our last transfer: a holder still
  // serving shared state to slower peers is not waiting in vain.
  if (end_sent_ && !verdict_ && now - std::max(end_sent_at_, last_progress) > deadlines_.verdict) {
    // Concluding here alone would break all-or-nothing: the master may still
    // commit once slower members end. Ask it to abort and take its verdict
    // (the abort, or a commit that won the race); only if it stays silent for
    // another period (a dead master is caught sooner by heartbeats) conclude.
    Status late = Status::failure(Errc::timeout, "no verdict from the master within " + ms(deadlines_.verdict));
    if (!abort_asked_at_) {
      abort_asked_at_ = now;
      lock.unlock();
      host_.send_end(epoch_, seq_, late);
      return;
    }
    if (now - *abort_asked_at_ <= deadlines_.verdict) return;
    lock.unlock();
    return fail_local(late, true);
  }
  if (phase_ == Phase::issued && !local_failure_ && now - issued_at_ > deadlines_.start) {
    lock.unlock();
    return fail_local(Status::failure(Errc::timeout, "the other peers did not start collective " +
                                                         std::to_string(seq_) + " within " + ms(deadlines_.start)));
  }
  auto idle = now - last_progress;
  if (phase_ == Phase::running && !local_failure_ && idle > deadlines_.progress) {
    lock.unlock();
    return fail_local(Status::failure(Errc::timeout, "collective " + std::to_string(seq_) + " made no progress for " +
                                                         ms(deadlines_.progress)));
  }
}

// A hold taken after the collective closed for I/O is given back at once:
// with the flag set before the count is read in maybe_finish (both seq_cst),
// either the holder sees the flag or the finisher sees the hold.
bool CollectiveOp::try_hold() {
  holds_.fetch_add(1);
  if (!io_closed_.load()) return true;
  release();
  return false;
}

void CollectiveOp::release() {
  if (holds_.fetch_sub(1) != 1) return;
  std::unique_lock lock(mu_);
  maybe_finish(lock);
}

void CollectiveOp::note_stall(Clock::time_point now) {
  double stall = std::chrono::duration<double>(now - last_progress()).count();
  timeline_.longest_stall_s = std::max(timeline_.longest_stall_s, stall);
}

void CollectiveOp::maybe_finish(std::unique_lock<std::mutex>& lock) {
  if (phase_ == Phase::finished || !verdict_) return;
  io_closed_.store(true);
  if (holds_.load() != 0) return;
  phase_ = Phase::finished;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  auto now = Clock::now();
  // The start ends at the go, or at whatever ended the collective before one came.
  auto started = went_at_ ? *went_at_ : end_sent_ ? std::min(end_sent_at_, *verdict_at_) : *verdict_at_;
  timeline_.start_s = seconds(started - issued_at_);
  timeline_.commit_s = end_sent_ ? seconds(*verdict_at_ - end_sent_at_) : 0;
  timeline_.duration_s = seconds(now - issued_at_);
  lock.unlock();
  host_.op_finished(seq_);
  lock.lock();
  finished_cv_.notify_all();
}

bool CollectiveOp::awaiting_verdict() const {
  std::lock_guard lock(mu_);
  return ended_ok_ && !verdict_;  // a link failing after our end(ok) leaves the verdict to the master
}

bool CollectiveOp::finished() const {
  std::lock_guard lock(mu_);
  return phase_ == Phase::finished;
}

void CollectiveOp::still_pending() {
  {
    std::lock_guard lock(mu_);
    if (!end_sent_ || verdict_ || local_failure_) return;
    end_sent_at_ = Clock::now();
    abort_asked_at_.reset();
  }
  progressed();  // the group is: wait_finished's cap counts from here too
}

Status CollectiveOp::wait_finished() {
  std::unique_lock lock(mu_);
  // The deadlines guarantee an end, but a transfer that keeps progressing may
  // rightly take any time: the cap counts from the last progress. Past it, only
  // a bug could keep the collective open; it becomes an error, not a hang.
  auto cap = deadlines_.start + deadlines_.progress + 2 * deadlines_.verdict + deadlines_.bug_margin;
  auto finished = [&] { return phase_ == Phase::finished; };
  while (!finished_cv_.wait_for(lock, std::min<Clock::duration>(cap, std::chrono::seconds(1)), finished)) {
    if (Clock::now() - std::max(issued_at_, last_progress()) > cap)
      return Status::failure(Errc::internal, "collective " + std::to_string(seq_) + " never finished");
  }
  return *verdict_;
}

std::optional<double> CollectiveOp::transfer_seconds() const {
  std::lock_guard lock(mu_);
  if (!went_at_ || !end_sent_ || local_failure_) return std::nullopt;
  return std::chrono::duration<double>(end_sent_at_ - *went_at_).count();
}

OpTimeline CollectiveOp::timeline() const {
  std::lock_guard lock(mu_);
  return timeline_;
}

}  // namespace ferry::peer
