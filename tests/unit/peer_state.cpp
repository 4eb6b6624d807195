// Where a peer stands (peer/peer_state.h): the first death is the one every
// waiter hears, a peer whose master is being dialed again fails calls as
// retryable, and a wait ends at its deadline or at the death.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "peer/peer_state.h"

using namespace ferry;
using namespace ferry::peer;
using namespace std::chrono_literals;
using Phase = PeerState::Phase;

namespace {

Errc code_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.code();
  }
  return Errc::internal;
}

}  // namespace

TEST_CASE("peer state: the first death is kept, and a dead peer throws its reason", "[peer_state]") {
  PeerState state;
  std::lock_guard lock(state.mu);
  CHECK(state.kill(Status::failure(Errc::master_lost, "gone")));
  CHECK_FALSE(state.kill(Status::failure(Errc::invalid_usage, "destroyed")));
  CHECK(state.dead);
  CHECK(state.dead_reason.code == Errc::master_lost);
  CHECK(code_of([&] { state.throw_if_dead(); }) == Errc::master_lost);
  CHECK(code_of([&] { state.require_accepted("allreduce"); }) == Errc::master_lost);
}

TEST_CASE("peer state: calls need an accepted peer, and while the master is away they are retryable", "[peer_state]") {
  PeerState state;
  std::lock_guard lock(state.mu);
  CHECK(code_of([&] { state.require_accepted("allreduce"); }) == Errc::invalid_usage);
  state.phase = Phase::accepted;
  CHECK_FALSE(state.master_away("allreduce"));
  CHECK_NOTHROW(state.require_accepted("allreduce"));
  state.phase = Phase::reconnecting;
  state.lost_master = Status::failure(Errc::master_lost, "lost the master: reset");
  auto away = state.master_away("allreduce");
  REQUIRE(away);
  CHECK(away->code == Errc::peer_lost);
  CHECK(away->message.find("lost the master: reset") != std::string::npos);
  CHECK(away->message.find("ferry_update_topology") != std::string::npos);
  CHECK(code_of([&] { state.require_accepted("allreduce"); }) == Errc::peer_lost);
}

TEST_CASE("peer state: a wait ends with its condition, at its deadline, or when the peer dies", "[peer_state]") {
  PeerState state;
  std::unique_lock lock(state.mu);
  CHECK_NOTHROW(state.wait_for(lock, [] { return true; }, "nothing", 1ms));
  CHECK(code_of([&] { state.wait_for(lock, [] { return false; }, "the answer", 20ms); }) == Errc::timeout);
  std::thread killer([&] {
    std::lock_guard kill_lock(state.mu);
    state.kill(Status::failure(Errc::kicked, "kicked"));
  });
  CHECK(code_of([&] { state.wait_for(lock, [] { return false; }, "the answer", 60s); }) == Errc::kicked);
  lock.unlock();
  killer.join();
}
