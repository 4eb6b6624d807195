#include "peer/master_calls.h"

#include <algorithm>

namespace ferry::peer {

MasterCalls::MasterCalls(PeerState& state, MasterSession& session, RingMembership& membership, OpRegistry& ops,
                         MasterRedial& redial, std::chrono::milliseconds timeout)
    : state_(state), session_(session), membership_(membership), ops_(ops), redial_(redial), timeout_(timeout) {}

template <class Send, class Answered>
bool MasterCalls::ask(std::unique_lock<std::mutex>& lock, Send send, Answered answered, const std::string& what,
                      std::chrono::milliseconds limit, bool resent_after_loss, const PeerState::Notice& notice) {
  const uint64_t losses = redial_.losses(), refusals = refusals_;
  auto lost = [&] { return resent_after_loss && redial_.losses() != losses; };
  auto refused = [&] { return resent_after_loss && refusals_ != refusals; };
  lock.unlock();
  send();
  lock.lock();
  state_.wait_for(lock, [&] { return answered() || lost() || refused(); }, what, limit, notice);
  if (refused()) throw Error(last_refusal_.code, last_refusal_.message);
  return answered();
}

void MasterCalls::ready_for(std::unique_lock<std::mutex>& lock, const char* call) {
  redial_.wait_for_master(lock);
  state_.require_accepted(call);
}

bool MasterCalls::cast_vote(std::unique_lock<std::mutex>& lock, wire::TopologyVote ballot,
                            std::chrono::milliseconds limit, const char* call, const PeerState::Notice& notice) {
  ready_for(lock, call);
  const uint64_t before = topology_done_count_;
  auto send = [&] {
    if (size_t in_flight = ops_.size())
      throw Error(Errc::invalid_usage, std::string(call) + " with " + std::to_string(in_flight) +
                                           " collectives in flight; wait for them first");
    ballot.links_broken = membership_.links_broken();
    session_.send(ballot);
  };
  return ask(lock, send, [&] { return topology_done_count_ > before; }, call, limit, /*resent_after_loss=*/true,
             notice);
}

void MasterCalls::update_topology(bool optimize) {
  std::lock_guard vote(state_.votes);
  std::unique_lock lock(state_.mu);
  wire::TopologyVote ballot;
  ballot.optimize = optimize ? 1 : 0;
  lock.unlock();
  const size_t members = membership_.view().ring.size();
  lock.lock();
  auto notice = [members](std::chrono::milliseconds waited, std::chrono::milliseconds left) {
    return "update_topology: no new ring after " + seconds_text(waited) + ": the master decides once every member " +
           "of the group (" + std::to_string(members) + " at the last ring) has called update_topology() or " +
           "wait_for_world(), then waits for their links; this call gives up in " + seconds_text(left) +
           " (timeout_ms)";
  };
  try {
    while (!cast_vote(lock, ballot, timeout_, "update_topology", notice)) {
    }
  } catch (const Error& e) {
    if (e.code() != Errc::timeout) throw;
    throw Error(Errc::timeout, std::string(e.what()) + ": the master decides once every member of the group has "
                                   "called update_topology() or wait_for_world() (C: ferry_update_topology, "
                                   "ferry_wait_for_world); make every member call it at the same point of its loop");
  }
}

void MasterCalls::wait_for_world(uint32_t min_peers, std::optional<std::chrono::milliseconds> limit) {
  std::lock_guard vote(state_.votes);
  std::unique_lock lock(state_.mu);
  const auto timeout = limit.value_or(timeout_);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    ready_for(lock, "wait_for_world");
    lock.unlock();
    const size_t world = membership_.view().ring.size();
    lock.lock();
    if (world >= min_peers) return;
    if (Clock::now() >= deadline)
      throw Error(Errc::timeout, "wait_for_world: the group has " + std::to_string(world) + " of " +
                                     std::to_string(min_peers) + " peers after " + ms(timeout) +
                                     ": start the missing peers with this master's address (each calls "
                                     "wait_for_world() too), or ask for fewer");
    // Rounded up, plus 1 ms: the master counts the hold on its millisecond clock from the
    // vote's arrival, and a hold ending a hair before our deadline meant a second vote.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()) +
                      std::chrono::milliseconds(1);
    wire::TopologyVote ballot;
    ballot.min_world = min_peers;
    ballot.hold_ms = static_cast<uint32_t>(std::min<int64_t>(left.count(), UINT32_MAX));
    auto notice = [&, world](std::chrono::milliseconds waited, std::chrono::milliseconds) {
      const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      return "wait_for_world: the group has " + std::to_string(world) + " of " + std::to_string(min_peers) +
             " peers after " + seconds_text(waited) + ": the master holds this vote until " +
             std::to_string(min_peers) + " members and newcomers are there (start more peers with this master " +
             "address; the other members must call wait_for_world() or update_topology() too); it gives up in " +
             seconds_text(std::max(remaining, std::chrono::milliseconds(0)));
    };
    // The master decides by the hold's end (its tick looks twice a second), then admits within timeout_ms.
    cast_vote(lock, ballot, left + std::chrono::milliseconds(1'000) + timeout_, "wait_for_world", notice);
  }
}

uint32_t MasterCalls::peers_pending() {
  std::lock_guard vote(state_.votes);
  std::unique_lock lock(state_.mu);
  for (;;) {
    ready_for(lock, "peers_pending");
    const uint64_t before = pending_answers_;
    auto notice = [](std::chrono::milliseconds waited, std::chrono::milliseconds left) {
      return "peers_pending: no answer after " + seconds_text(waited) + ": the master answers once every member " +
             "of the group has called peers_pending(); this call gives up in " + seconds_text(left) + " (timeout_ms)";
    };
    bool answered;
    try {
      answered = ask(lock, [&] { session_.send(wire::PendingQuery{}); }, [&] { return pending_answers_ > before; },
                     "peers_pending", timeout_, /*resent_after_loss=*/true, notice);
    } catch (const Error& e) {
      if (e.code() != Errc::timeout) throw;
      throw Error(Errc::timeout, std::string(e.what()) + ": the master answers once every member of the group has "
                                     "called peers_pending() (C: ferry_peers_pending); make every member call it at "
                                     "the same point of its loop");
    }
    if (answered) return last_pending_;
  }
}

std::vector<wire::LinkEntry> MasterCalls::link_matrix() {
  std::unique_lock lock(state_.mu);
  state_.require_accepted("link_matrix");
  const uint64_t request = ++link_queries_;
  auto send = [&] {
    membership_.report_links(/*now=*/true);  // on the same connection ahead of the query: the answer holds it
    session_.send(wire::LinkMatrixQuery{.request = request});
  };
  ask(lock, send, [&] { return link_answered_ >= request; }, "the link matrix query", timeout_,
      /*resent_after_loss=*/false);
  return link_matrix_;
}

void MasterCalls::on_topology_done() {
  std::lock_guard lock(state_.mu);
  ++topology_done_count_;
  state_.cv.notify_all();
}

void MasterCalls::on_pending_count(uint32_t pending) {
  std::lock_guard lock(state_.mu);
  last_pending_ = pending;
  ++pending_answers_;
  state_.cv.notify_all();
}

void MasterCalls::on_call_refused(const wire::CallRefused& refused) {
  std::lock_guard lock(state_.mu);
  // Only a mismatch is a refusal a peer can act on; any other code is the master's bug.
  const bool known = refused.code == static_cast<uint32_t>(Errc::mismatch);
  last_refusal_ = Status::failure(known ? Errc::mismatch : Errc::protocol, refused.reason);
  ++refusals_;
  state_.cv.notify_all();
}

void MasterCalls::on_link_matrix(wire::LinkMatrix& matrix) {
  std::lock_guard lock(state_.mu);
  // Answers come in request order: a later one is at least as fresh as any waiter asked for.
  link_answered_ = std::max(link_answered_, matrix.request);
  link_matrix_ = std::move(matrix.links);
  state_.cv.notify_all();
}

}  // namespace ferry::peer
