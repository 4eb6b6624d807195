// Where this peer stands with its run, shared by the parts of a Communicator
// (communicator.h): its phase (idle -> connecting -> pending -> accepted <->
// reconnecting, and dead), why it died, its id, and the condition variable
// every waiter of those parts sleeps on.
//
// Lock rule: `mu` guards every field below it and the fields the parts mark
// "guarded by state.mu". It is taken after `votes` and is held only briefly:
// never across a send to the master, a wait on another thread, or another
// object's lock, except the two critical sections communicator.h names.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "core/duration_text.h"
#include "core/error.h"
#include "core/wait_notice.h"

namespace ferry::peer {

struct PeerState {
  enum class Phase { idle, connecting, pending, accepted, reconnecting, dead };

  std::mutex votes;  // one vote (connect, topology, pending query) at a time; taken before mu
  // phase == dead, read without mu: ops report their ends from their own locks.
  std::atomic<bool> dead{false};
  mutable std::mutex mu;
  std::condition_variable cv;  // notified on every change of the fields below and of the parts' answers
  Phase phase = Phase::idle;   // guarded by mu
  Status dead_reason;          // guarded by mu
  uint64_t peer_id = 0;        // guarded by mu; from the master's welcome
  Status lost_master;          // guarded by mu; why the last master was lost

  // Marks the peer dead and wakes every waiter; false when it already was. mu held.
  bool kill(const Status& why);
  // Throws the reason of a dead peer. mu held.
  void throw_if_dead() const;
  // While the master is being dialed again: the retryable failure a call gets. mu held.
  // Collectives are issued and fail at once with it, so callers meet it where they wait.
  std::optional<Status> master_away(const char* call) const;
  // Throws unless accepted (the check every collective and call starts with). mu held.
  void require_accepted(const char* call) const;

  // What a long wait says (core/wait_notice.h): given how long it has waited and how long
  // it has left, the warning line. Called with mu held: it may read fields, take no lock.
  using Notice = std::function<std::string(std::chrono::milliseconds waited, std::chrono::milliseconds left)>;

  // Waits on cv until pred or dead or `within` passed; throws on the latter two. A wait
  // given a notice logs it at warning level after 5 s and every 30 s. mu held via lock.
  template <class Pred>
  void wait_for(std::unique_lock<std::mutex>& lock, Pred pred, const std::string& what,
                std::chrono::milliseconds within, const Notice& notice = nullptr) {
    auto done = [&] { return pred() || phase == Phase::dead; };
    const auto began = std::chrono::steady_clock::now(), deadline = began + within;
    WaitNotice notices(began);
    bool ok;
    while (!(ok = cv.wait_until(lock, notice ? std::min(deadline, notices.next()) : deadline, done)) &&
           std::chrono::steady_clock::now() < deadline)
      if (auto waited = notices.due(std::chrono::steady_clock::now()))
        log_notice(notice(*waited, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - began) - *waited));
    throw_if_dead();
    if (!ok) throw Error(Errc::timeout, what + " did not complete within " + ms(within));
  }

 private:
  static void log_notice(const std::string& line);
};

}  // namespace ferry::peer
