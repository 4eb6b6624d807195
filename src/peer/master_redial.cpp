#include "peer/master_redial.h"

#include <algorithm>

#include <pthread.h>

#include "core/log.h"

namespace ferry::peer {
namespace {

using Phase = PeerState::Phase;
using std::chrono::milliseconds;

constexpr milliseconds kFirstBackoff{50}, kMaxBackoff{1'000};
// One redial at most: a master that took the connection answers in milliseconds.
constexpr milliseconds kMaxRedial{2'000};
// The first dial refused (or unroutable) at once is tried this often, ~5.5 s with the back-off: a master
// started alongside its peers (a Python one: its imports) binds within that; refused longer, the address is wrong.
constexpr int kRefusedTries = 10;

milliseconds until(Clock::time_point deadline) {
  return std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
}

}  // namespace

MasterRedial::MasterRedial(PeerState& state, MasterSession& session, OpRegistry& ops, Limits limits, Hooks hooks)
    : state_(state), session_(session), ops_(ops), limits_(limits), hooks_(std::move(hooks)) {}

MasterRedial::~MasterRedial() { join(); }

template <class Try, class Stop>
MasterRedial::DialEnd MasterRedial::dial_with_backoff(Clock::time_point deadline, Try try_once, Stop stop) {
  for (auto backoff = kFirstBackoff;; backoff = std::min(2 * backoff, kMaxBackoff)) {
    if (try_once(until(deadline))) return DialEnd::dialed;
    std::unique_lock lock(state_.mu);
    if (stop()) return DialEnd::stopped;
    if (Clock::now() >= deadline) return DialEnd::deadline;
    state_.cv.wait_until(lock, std::min(Clock::now() + backoff, deadline), stop);
    if (stop()) return DialEnd::stopped;
    if (Clock::now() >= deadline) return DialEnd::deadline;
  }
}

void MasterRedial::first_dial() {
  const bool once = limits_.connect.count() == 0;
  const auto began = Clock::now();
  std::optional<MasterSession::Unanswered> unanswered;
  int refused = 0;
  // A name that does not resolve is not asked again: the resolver already retried its servers
  // within its own timeout, and asking again would mostly repeat that wait for a typo.
  auto hopeless = [&] { return unanswered && (!unanswered->resolved || refused >= kRefusedTries); };
  auto end = dial_with_backoff(
      began + limits_.connect,
      [&](milliseconds left) {
        try {
          session_.open(hooks_.hello(), once ? limits_.dial : std::clamp(left, milliseconds(1), limits_.dial),
                        &state_.dead);
          return true;
        } catch (const MasterSession::Abandoned&) {
          return false;  // dead: the loop stops, and the death's reason is what connect throws
        } catch (const MasterSession::Unanswered& e) {
          if (e.code() == Errc::connect) ++refused;  // at once; Errc::timeout: nothing answered in time
          if (!unanswered && !once && e.resolved)
            log().warn("{}; dialing it again ({} tries while refused, up to {} while unanswered: "
                       "master_connect_timeout_ms)",
                       e.what(), kRefusedTries, ms(limits_.connect));
          unanswered = e;
          return false;
        }
      },
      [&] { return state_.phase == Phase::dead || hopeless(); });
  if (end == DialEnd::dialed) return;
  {
    std::lock_guard lock(state_.mu);
    state_.throw_if_dead();
  }
  if (once) throw *unanswered;
  if (!unanswered->resolved)
    throw Error(unanswered->code(), std::string(unanswered->what()) + "; check the master's host name");
  if (end == DialEnd::stopped)
    throw Error(unanswered->code(), std::string(unanswered->what()) + "; refused " + std::to_string(refused) +
                                        " times in " + ms(std::chrono::duration_cast<milliseconds>(Clock::now() - began)) +
                                        ": is a ferry master listening at that address (host, port, IPv4 or IPv6)?");
  throw Error(unanswered->code(), std::string(unanswered->what()) + "; no master answered within " +
                                      ms(limits_.connect) + " (master_connect_timeout_ms)");
}

void MasterRedial::on_session_failed(const Status& why) {
  {
    std::unique_lock lock(state_.mu);
    const bool lost = why.code == Errc::master_lost || why.code == Errc::connect;
    if (state_.phase == Phase::reconnecting && lost) {
      ++failed_redials_;  // a redial that failed before its welcome: reconnect_loop dials again
      state_.cv.notify_all();
      return;
    }
    const bool resumable =
        state_.phase == Phase::accepted && why.code == Errc::master_lost && limits_.reconnect.count() > 0;
    if (!resumable) {
      lock.unlock();
      return hooks_.die(why);
    }
  }
  // A record cut short could abort here what another member saw committed: better not to resume at all.
  if (auto too_large = hooks_.resume_too_large())
    return hooks_.die(Status::failure(Errc::master_lost, why.message + "; cannot resume with a new master: " + *too_large));
  begin_reconnect(why);
}

void MasterRedial::begin_reconnect(const Status& why) {
  {
    std::lock_guard lock(state_.mu);
    if (state_.phase != Phase::accepted) return;
    state_.phase = Phase::reconnecting;
    state_.lost_master = why;
    deadline_ = Clock::now() + limits_.reconnect;
    ++losses_;
    state_.cv.notify_all();
  }
  log().warn("{}; dialing it again for up to {}", why.message, ms(limits_.reconnect));
  // What ended ok here may have been committed by the lost master: the next one says.
  Status retry = Status::failure(Errc::peer_lost, why.message + "; reconnecting: call ferry_update_topology, then again");
  for (auto& op : ops_.in_flight())
    if (!op->awaiting_verdict()) op->fail_local(retry, /*final=*/true);
  std::thread last;
  std::optional<Status> cannot;
  {
    std::lock_guard lock(state_.mu);
    if (state_.phase != Phase::reconnecting) return;  // destroyed meanwhile: nothing to dial for
    last = std::move(thread_);
    try {
      thread_ = std::thread([this, loss = losses_] { reconnect_loop(loss); });
    } catch (const std::system_error& e) {
      cannot = Status::failure(Errc::master_lost, why.message + "; cannot start the redial thread: " + e.what());
    }
  }
  if (last.joinable()) last.join();  // the last loss's loop, which ended with its welcome
  if (cannot) hooks_.die(*cannot);
}

bool MasterRedial::ours(uint64_t loss) const {
  // Ours while this loss lasts: once welcomed, a later loss has a loop of its own.
  return state_.phase == Phase::reconnecting && losses_ == loss;
}

void MasterRedial::reconnect_loop(uint64_t loss) {
  pthread_setname_np(pthread_self(), "ferry-redial");
  Clock::time_point deadline;
  {
    std::lock_guard lock(state_.mu);
    deadline = deadline_;
  }
  auto end = dial_with_backoff(
      deadline, [&](milliseconds left) { return redial_once(loss, left); }, [&] { return !ours(loss); });
  if (end != DialEnd::deadline) return;
  Status gone;
  {
    std::lock_guard lock(state_.mu);
    if (!ours(loss)) return;
    gone = Status::failure(Errc::master_lost, state_.lost_master.message + "; it did not come back within " +
                                                  ms(limits_.reconnect));
  }
  hooks_.die(gone);
}

bool MasterRedial::redial_once(uint64_t loss, milliseconds left) {
  Status lost;
  {
    std::lock_guard lock(state_.mu);
    if (!ours(loss)) return true;
    lost = state_.lost_master;
  }
  if (auto too_large = hooks_.resume_too_large()) {  // an op ended ok since the loss, past what a record holds
    hooks_.die(Status::failure(Errc::master_lost, lost.message + "; cannot resume: " + *too_large));
    return true;
  }
  wire::Hello hello = hooks_.hello();
  uint64_t failures;
  Clock::time_point deadline;
  {
    std::lock_guard lock(state_.mu);
    failures = failed_redials_;
    deadline = deadline_;
  }
  try {
    session_.open(std::move(hello), std::clamp(left, milliseconds(1), kMaxRedial), &state_.dead);
  } catch (const std::exception& e) {
    log().debug("redial of the master failed: {}", e.what());
    return false;
  }
  // Dialed: the welcome, a kick or a close comes within the heartbeat deadline (the session's receive timeout).
  std::unique_lock lock(state_.mu);
  state_.cv.wait_until(lock, deadline, [&] { return !ours(loss) || failed_redials_ != failures; });
  return !ours(loss);
}

bool MasterRedial::on_welcome(uint64_t peer_id) {
  bool resumed;
  {
    std::lock_guard lock(state_.mu);
    if (state_.phase != Phase::reconnecting) return false;
    resumed = peer_id == state_.peer_id;
    if (resumed) {
      state_.phase = Phase::accepted;
      state_.cv.notify_all();
    }
  }
  if (resumed) {
    log().info("the master is back: resumed as peer {}", peer_id);
    return true;
  }
  hooks_.die(Status::failure(Errc::protocol, "the master took this peer back under another id"));
  return true;
}

void MasterRedial::wait_for_master(std::unique_lock<std::mutex>& lock) {
  state_.cv.wait_until(lock, deadline_, [&] { return state_.phase != Phase::reconnecting; });
  state_.throw_if_dead();
}

void MasterRedial::join() {
  std::thread redial;
  {
    std::lock_guard lock(state_.mu);
    redial = std::move(thread_);
  }
  if (redial.joinable()) redial.join();
}

}  // namespace ferry::peer
