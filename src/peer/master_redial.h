// Dialing the master: the first time (connect) and again after losing it.
//
// One back-off loop serves both (dial_with_backoff): a try, then a wait of
// 50 ms doubling to 1 s, cut at the deadline, and so on until a try succeeds,
// the deadline passes or the dial is no longer wanted.
//  - The first dial tries until master_connect_timeout (0: once): a launcher
//    may start the peers a moment before their master. A dial refused at once
//    is tried kRefusedTries times only, a name that does not resolve once:
//    a wrong address is told in seconds (master_redial.cpp says why). The
//    first failure is a warning naming the address. A master that answered
//    and refused is final.
//  - A lost session is decided here (on_session_failed). Losing the master
//    (not a kick) while accepted, with a reconnect window: the peer keeps its
//    tensors, id and ring, fails every collective that cannot have been
//    committed (those that ended ok here and await a verdict stay open: the
//    next master says), and a thread of its own dials again, saying what it
//    knew (resume_record.h), until the window closes; a master that never
//    comes back is master_lost. A redial that fails before its welcome is
//    dialed again. Anything else (a kick, a refusal, no window, a record too
//    large to resume) ends the peer.
//
// Lock rule: its fields are guarded by state.mu (peer_state.h), taken
// briefly; no lock is held across a dial, the hooks or the ops' calls. The
// redial thread is joined by join() (the Communicator's destructor).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "peer/master_session.h"
#include "peer/op_registry.h"
#include "peer/peer_state.h"

namespace ferry::peer {

class MasterRedial {
 public:
  // What it asks of its owner; each is called with no lock held.
  struct Hooks {
    std::function<wire::Hello()> hello;  // the hello a dial sends (the resume record while reconnecting)
    std::function<std::optional<std::string>()> resume_too_large;  // why the record would not fit a hello
    std::function<void(const Status&)> die;
  };
  struct Limits {
    std::chrono::milliseconds dial;       // one first dial at most (timeout_ms)
    std::chrono::milliseconds connect;    // master_connect_timeout; 0: one dial
    std::chrono::milliseconds reconnect;  // master_reconnect_timeout; 0: a lost master is the end
  };

  MasterRedial(PeerState& state, MasterSession& session, OpRegistry& ops, Limits limits, Hooks hooks);
  ~MasterRedial();
  MasterRedial(const MasterRedial&) = delete;
  MasterRedial& operator=(const MasterRedial&) = delete;

  // connect's dial (phase connecting). Throws Error: the peer died, the
  // transport failed, or no master answered (connect) by the deadline.
  void first_dial();
  // The session ended: dial again, or the peer dies.
  void on_session_failed(const Status& why);
  // A welcome while reconnecting: true (the peer is back, or died for being
  // taken back under another id). False: not a redial's, the owner's to handle.
  bool on_welcome(uint64_t peer_id);
  // Waits while the master is being dialed again (up to the window); throws if the peer died. state.mu held via lock.
  void wait_for_master(std::unique_lock<std::mutex>& lock);
  // Masters lost so far: a call sent to a lost one is sent again. state.mu held.
  uint64_t losses() const { return losses_; }
  // Waits for the redial thread (its dial ends within ~2 s once the peer died).
  void join();

 private:
  enum class DialEnd { dialed, stopped, deadline };
  // Calls try_once(time left) with no lock held until it returns true, or
  // `stop()` (state.mu held) or the deadline; see the top of this file.
  template <class Try, class Stop>
  DialEnd dial_with_backoff(Clock::time_point deadline, Try try_once, Stop stop);
  void begin_reconnect(const Status& why);
  void reconnect_loop(uint64_t loss);  // for the loss numbered `loss` (losses_)
  // One redial: the resume record's check, the dial, then its welcome or failure. True: welcomed or no longer ours.
  bool redial_once(uint64_t loss, std::chrono::milliseconds left);
  bool ours(uint64_t loss) const;  // this loss's redial is still wanted. state.mu held.

  PeerState& state_;
  MasterSession& session_;
  OpRegistry& ops_;
  const Limits limits_;
  const Hooks hooks_;
  // Guarded by state_.mu:
  uint64_t losses_ = 0;
  uint64_t failed_redials_ = 0;  // redials whose session failed before the welcome
  Clock::time_point deadline_{};  // of the reconnect window, while reconnecting
  std::thread thread_;            // runs reconnect_loop
};

}  // namespace ferry::peer
