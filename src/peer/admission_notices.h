// What a peer says about admission while the members run on: the pending newcomer's own
// wait (connect) and the members' once-an-epoch word that someone waits to join.
//
// Why the members do not vote by themselves when someone is pending: a vote changes the
// world size and the ranks under the caller and must fall at the same call on every member,
// which async collectives in flight rule out (docs/design.md, "Joining").
//
// Threading: PendingNewcomerNotice from any thread (one atomic); wait_for_admission as
// PeerState::wait_for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/error.h"
#include "peer/peer_state.h"
#include "wire/messages.h"

namespace ferry::peer {

// connect's wait (state.mu held in `lock`) until this peer is accepted, within `timeout`: says
// every so often that it is pending at `master` and which calls of the members admit it, and
// its timeout error names them too. Throws as PeerState::wait_for does.
void wait_for_admission(PeerState& state, std::unique_lock<std::mutex>& lock, const std::string& master,
                        std::chrono::milliseconds timeout);

class PendingNewcomerNotice {
 public:
  // A commit: when it says newcomers wait, warn once for its epoch. The count rides on a
  // verdict the master sends anyway: no query, nothing on the hot path.
  void on_commit(const wire::CollectiveResult& result);

 private:
  std::atomic<uint64_t> told_epoch_{UINT64_MAX};
};

}  // namespace ferry::peer
