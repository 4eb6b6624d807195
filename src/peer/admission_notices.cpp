#include "peer/admission_notices.h"

#include "core/duration_text.h"
#include "core/log.h"
#include "core/wait_notice.h"

namespace ferry::peer {

namespace {

std::string pending_connect_notice(const std::string& master, std::chrono::milliseconds waited,
                                   std::chrono::milliseconds left) {
  return "connect: pending at the master " + master + " for " + seconds_text(waited) +
         ": a newcomer is admitted when the members of its group call update_topology() or "
         "wait_for_world() (C: ferry_update_topology, ferry_wait_for_world; peers_pending() "
         "tells them someone waits); this call gives up in " +
         seconds_text(left) + " (timeout_ms)";
}

// Before the master's welcome: something took the connection but has not welcomed this peer
// (a ferry master challenges at once, then welcomes it as pending).
std::string unwelcomed_connect_notice(const std::string& master, std::chrono::milliseconds waited,
                                      std::chrono::milliseconds left) {
  return "connect: the master " + master + " has not welcomed this peer after " + seconds_text(waited) +
         " (a ferry master answers at once): is a ferry master serving there (a Python ferry.Master(start=False) "
         "serves once started), with TLS on both ends or neither? This call gives up in " + seconds_text(left) +
         " (timeout_ms)";
}

}  // namespace

void wait_for_admission(PeerState& state, std::unique_lock<std::mutex>& lock, const std::string& master,
                        std::chrono::milliseconds timeout) {
  try {
    state.wait_for(lock, [&] { return state.phase == PeerState::Phase::accepted; }, "connect", timeout,
                   [&](auto waited, auto left) {
                     return state.phase == PeerState::Phase::connecting
                                ? unwelcomed_connect_notice(master, waited, left)
                                : pending_connect_notice(master, waited, left);
                   });
  } catch (const Error& e) {
    if (e.code() != Errc::timeout) throw;
    if (state.phase == PeerState::Phase::connecting)
      throw Error(Errc::timeout, "connect: the master " + master + " did not welcome this peer within " + ms(timeout) +
                                     ": is a ferry master serving there, with TLS on both ends or neither?");
    throw Error(Errc::timeout, "connect: still pending at the master " + master + " after " + ms(timeout) +
                                  ": a newcomer is admitted only when the members of its group call "
                                  "ferry_update_topology or ferry_wait_for_world (ferry_peers_pending tells them "
                                  "someone waits); this peer stays pending, and ferry_connect again waits on");
  }
}

void PendingNewcomerNotice::on_commit(const wire::CollectiveResult& result) {
  if (result.code != 0 || result.pending == 0) return;
  if (told_epoch_.exchange(result.epoch) == result.epoch) return;
  log().warn("{} newcomer(s) wait at the master to join this group while its collectives go on without them "
             "(collective {} of epoch {} committed): the master admits them only when every member calls "
             "update_topology() or wait_for_world() (C: ferry_update_topology, ferry_wait_for_world); "
             "peers_pending() is the cheap check at a loop boundary. Said once per epoch",
             result.pending, result.seq, result.epoch);
}

}  // namespace ferry::peer
