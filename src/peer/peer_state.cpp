#include "peer/peer_state.h"

#include "core/log.h"

namespace ferry::peer {

bool PeerState::kill(const Status& why) {
  if (phase == Phase::dead) return false;
  phase = Phase::dead;
  dead = true;
  dead_reason = why;
  cv.notify_all();
  return true;
}

void PeerState::log_notice(const std::string& line) { log().warn("{}", line); }

void PeerState::throw_if_dead() const {
  if (phase == Phase::dead) throw Error(dead_reason.code, dead_reason.message);
}

std::optional<Status> PeerState::master_away(const char* call) const {
  if (phase != Phase::reconnecting) return std::nullopt;
  return Status::failure(Errc::peer_lost, std::string(call) + ": the master is being reconnected (" +
                                              lost_master.message +
                                              "); call ferry_update_topology, which waits for it, then again");
}

void PeerState::require_accepted(const char* call) const {
  throw_if_dead();
  if (auto away = master_away(call)) throw Error(away->code, away->message);
  if (phase != Phase::accepted)
    throw Error(Errc::invalid_usage, std::string(call) + ": this peer is not admitted yet; call ferry_connect first");
}

}  // namespace ferry::peer
