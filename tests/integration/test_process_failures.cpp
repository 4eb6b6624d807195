// Failures only real processes can show: a peer SIGKILLed or SIGSTOPped in the
// middle of all-reduces, and the master process killed under running peers.
// Each peer is a ferry-test-peer process (FERRY_TEST_PEER_BIN) reporting every
// outcome with a CLOCK_MONOTONIC time stamp, so a failure's delay after the
// signal is measured across processes. Deadlines here turn hangs into
// failures; the bounds asserted are the ones ferry.h promises.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"  // tools/common
#include "harness.h"
#include "master_process.h"
#include "peer_process_output.h"

using namespace ferry::test;
using ferry::tooling::Child;
using ferry::tooling::ChildSet;
using ferry::tooling::Clock;

namespace {

double monotonic_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The first line at or after time t, if any.
std::optional<OpLine> first_after(const Child& child, double t, const char* kind = "op") {
  for (const OpLine& op : op_lines(child.out()))
    if (op.kind == kind && op.t >= t) return op;
  return std::nullopt;
}

// The first failed op line at or after t.
std::optional<OpLine> first_failure_after(const Child& child, double t) {
  for (const OpLine& op : op_lines(child.out()))
    if (op.kind == "op" && op.t >= t && op.result != FERRY_OK) return op;
  return std::nullopt;
}

struct PeerFlags {
  int peers = 3;
  size_t floats = 1 << 22;  // 16 MiB: each op lasts long enough to be killed in
  uint32_t heartbeat_ms = 2000;
  uint32_t progress_ms = 5000;
  uint32_t timeout_ms = 20000;
  bool probe_after_fatal = false;
  bool shared_memory = false;
  bool admit = false;              // admits newcomers between rounds
  bool rejoin_after_kick = false;  // a kicked peer joins again as a newcomer, once
  std::string mode = "loop";       // ferry-test-peer --mode
  std::optional<uint32_t> master_reconnect_ms;  // unset: the library's default
};

Child& spawn_peer(ChildSet& children, const std::string& name, const std::string& master, const PeerFlags& f) {
  std::vector<std::string> argv = {FERRY_TEST_PEER_BIN, "--master", master, "--peers", std::to_string(f.peers),
                                   "--rounds", "100000", "--floats", std::to_string(f.floats), "--heartbeat-ms",
                                   std::to_string(f.heartbeat_ms), "--progress-ms", std::to_string(f.progress_ms),
                                   "--timeout-ms", std::to_string(f.timeout_ms)};
  if (f.probe_after_fatal) argv.emplace_back("--probe-after-fatal");
  if (f.shared_memory) argv.emplace_back("--shared-memory");
  if (f.admit) argv.emplace_back("--admit");
  if (f.rejoin_after_kick) argv.emplace_back("--rejoin-after-kick");
  argv.insert(argv.end(), {"--mode", f.mode});
  if (f.master_reconnect_ms) argv.insert(argv.end(), {"--master-reconnect-ms", std::to_string(*f.master_reconnect_ms)});
  return children.spawn(name, argv);
}

std::vector<Child*> spawn_peers(ChildSet& children, const std::string& master, const PeerFlags& f) {
  std::vector<Child*> peers;
  for (int i = 0; i < f.peers; ++i) peers.push_back(&spawn_peer(children, "peer " + std::to_string(i), master, f));
  return peers;
}

// Pumps until every peer has completed `ops` successful all-reduces in the full world.
bool wait_for_ok_ops(ChildSet& children, const std::vector<Child*>& peers, size_t ops, std::chrono::seconds limit) {
  return children.pump_until(
      [&] {
        return std::all_of(peers.begin(), peers.end(), [&](const Child* p) { return ok_ops(*p) >= ops; });
      },
      Clock::now() + limit);
}

// Spawns the peers and waits until each has run two all-reduces in the full world.
std::vector<Child*> running_peers(ChildSet& children, const std::string& master, const PeerFlags& f) {
  std::vector<Child*> peers = spawn_peers(children, master, f);
  INFO(describe(peers));
  REQUIRE(wait_for_ok_ops(children, peers, 2, std::chrono::seconds(60)));
  return peers;
}

void signal_peer(const Child& child, int signal_number) { REQUIRE(::kill(child.pid(), signal_number) == 0); }

}  // namespace

TEST_CASE("a peer SIGKILLed mid all-reduce: survivors fail with PEER_LOST within 2 s, then succeed without it",
          "[process][failure]") {
  // Over shared memory nothing but the link's connection tells of the death.
  const bool shared_memory = GENERATE(false, true);
  INFO("shared memory: " << shared_memory);
  EmbeddedMaster master;
  ChildSet children(false);
  PeerFlags flags;
  flags.shared_memory = shared_memory;
  std::vector<Child*> peers = running_peers(children, master.address(), flags);

  // The peers run all-reduces back to back, so the kill lands in one.
  const double killed_at = monotonic_s();
  signal_peer(*peers[2], SIGKILL);
  std::vector<Child*> survivors{peers[0], peers[1]};
  // Each survivor reports the failure, votes the peer out and completes an all-reduce of two.
  auto recovered = [&](const Child* p) {
    auto failure = first_failure_after(*p, killed_at);
    if (!failure) return false;
    auto next = first_after(*p, failure->t + 1e-9);
    return next.has_value() && next->result == FERRY_OK;
  };
  const bool done = children.pump_until(
      [&] { return std::all_of(survivors.begin(), survivors.end(), recovered); }, Clock::now() + std::chrono::seconds(60));
  INFO(describe(peers));
  REQUIRE(done);
  for (const Child* p : survivors) {
    const OpLine failure = *first_failure_after(*p, killed_at);
    CHECK(failure.result == FERRY_ERR_PEER_LOST);
    // Closed-socket detection, not a heartbeat deadline: well under heartbeat_ms + progress_ms.
    CHECK(failure.t - killed_at <= 2.0);
    const OpLine next = *first_after(*p, failure.t + 1e-9);
    CHECK(next.result == FERRY_OK);
    CHECK(next.world == 2);
    CHECK(next.value == 2.0);  // ones summed over the smaller world
    CHECK(next.uniform == 1);
  }
}

TEST_CASE("a peer SIGSTOPped: survivors fail with PEER_LOST or TIMEOUT within its deadlines, never hang",
          "[process][failure]") {
  const bool shared_memory = GENERATE(false, true);
  INFO("shared memory: " << shared_memory);
  EmbeddedMaster master;
  ChildSet children(false);
  PeerFlags flags;
  flags.shared_memory = shared_memory;
  flags.heartbeat_ms = 1500;
  flags.progress_ms = 2500;
  std::vector<Child*> peers = running_peers(children, master.address(), flags);

  const double stopped_at = monotonic_s();
  signal_peer(*peers[1], SIGSTOP);
  std::vector<Child*> survivors{peers[0], peers[2]};
  const bool failed = children.pump_until(
      [&] {
        return std::all_of(survivors.begin(), survivors.end(),
                           [&](const Child* p) { return first_failure_after(*p, stopped_at).has_value(); });
      },
      Clock::now() + std::chrono::seconds(30));
  // The stopped peer never comes back; the survivors go on in a world of two.
  signal_peer(*peers[1], SIGKILL);
  signal_peer(*peers[1], SIGCONT);
  INFO(describe(peers));
  REQUIRE(failed);
  // The master drops the silent peer after heartbeat_ms; a transfer that stalls fails after progress_ms.
  const double bound = std::max(flags.heartbeat_ms, flags.progress_ms) / 1000.0 + 1.5;
  for (const Child* p : survivors) {
    const OpLine failure = *first_failure_after(*p, stopped_at);
    CHECK((failure.result == FERRY_ERR_PEER_LOST || failure.result == FERRY_ERR_TIMEOUT));
    CHECK(failure.t - stopped_at <= bound);
  }
  const bool recovered = children.pump_until(
      [&] {
        return std::all_of(survivors.begin(), survivors.end(), [&](const Child* p) {
          auto op = first_after(*p, first_failure_after(*p, stopped_at)->t + 1e-9);
          return op && op->result == FERRY_OK;
        });
      },
      Clock::now() + std::chrono::seconds(60));
  REQUIRE(recovered);
  for (const Child* p : survivors) {
    const OpLine next = *first_after(*p, first_failure_after(*p, stopped_at)->t + 1e-9);
    CHECK(next.world == 2);
    CHECK(next.value == 2.0);
  }
}

TEST_CASE("a peer SIGSTOPped past its heartbeat deadline and resumed: told it was evicted, it rejoins as a newcomer",
          "[process][failure]") {
  EmbeddedMaster master;
  ChildSet children(false);
  PeerFlags flags;
  flags.heartbeat_ms = 1500;
  flags.progress_ms = 2500;
  flags.admit = true;
  flags.rejoin_after_kick = true;
  std::vector<Child*> peers = running_peers(children, master.address(), flags);

  const double stopped_at = monotonic_s();
  signal_peer(*peers[1], SIGSTOP);
  std::vector<Child*> survivors{peers[0], peers[2]};
  auto ok_in_world = [](const Child& p, double after, unsigned world) {
    for (const OpLine& op : op_lines(p.out()))
      if (op.kind == "op" && op.t >= after && op.result == FERRY_OK && op.world == world) return true;
    return false;
  };
  const bool shrunk = children.pump_until(
      [&] { return std::all_of(survivors.begin(), survivors.end(), [&](Child* p) { return ok_in_world(*p, stopped_at, 2); }); },
      Clock::now() + std::chrono::seconds(60));
  const double resumed_at = monotonic_s();
  signal_peer(*peers[1], SIGCONT);
  INFO(describe(peers));
  REQUIRE(shrunk);  // evicted: the survivors went on without it

  // Resumed, it reads the master's kick (not a lost master), joins again, and all three run together.
  const bool regrown = children.pump_until(
      [&] {
        return std::all_of(peers.begin(), peers.end(), [&](Child* p) { return ok_in_world(*p, resumed_at, 3); });
      },
      Clock::now() + std::chrono::seconds(60));
  INFO(describe(peers));
  REQUIRE(regrown);
  auto rejoined = first_after(*peers[1], stopped_at, "rejoined");
  REQUIRE(rejoined.has_value());
  CHECK(rejoined->result == FERRY_ERR_KICKED);
  CHECK_THAT(peers[1]->err_tail(20), Catch::Contains("evicted: the master heard nothing from this peer") &&
                                         Catch::Contains("heartbeat deadline (1500 ms)"));
  for (Child* p : peers) {
    const OpLine last = op_lines(p->out()).back();
    CHECK(last.result == FERRY_OK);
    CHECK(last.value == 3.0);
  }
}

TEST_CASE("the master process killed, with no reconnect window: every peer's pending and next calls fail with "
          "MASTER_LOST",
          "[process][failure]") {
  ChildSet children(false);
  const MasterProcess master = start_master(children);
  const std::string& address = master.address;

  PeerFlags flags;
  flags.peers = 2;
  flags.heartbeat_ms = 2000;
  flags.probe_after_fatal = true;
  flags.master_reconnect_ms = 0;
  std::vector<Child*> peers = spawn_peers(children, address, flags);
  INFO(describe(peers));
  REQUIRE(wait_for_ok_ops(children, peers, 2, std::chrono::seconds(60)));

  const double killed_at = monotonic_s();
  REQUIRE(::kill(master.child->pid(), SIGKILL) == 0);
  const bool ended = children.pump_until(
      [&] { return std::none_of(peers.begin(), peers.end(), [](const Child* p) { return p->running(); }); },
      Clock::now() + std::chrono::seconds(30));
  INFO(describe(peers));
  REQUIRE(ended);
  // A closed master socket is seen at once; a silent one after heartbeat_ms. Either way, within this.
  const double bound = flags.heartbeat_ms / 1000.0 + 1.5;
  for (const Child* p : peers) {
    CHECK(p->exit_code() == std::optional<int>(3));
    const auto failure = first_failure_after(*p, killed_at);
    REQUIRE(failure.has_value());
    CHECK(failure->result == FERRY_ERR_MASTER_LOST);
    CHECK(failure->t - killed_at <= bound);
    const auto next = first_after(*p, killed_at, "next");
    REQUIRE(next.has_value());
    CHECK(next->result == FERRY_ERR_MASTER_LOST);
    CHECK(next->t - failure->t <= 1.0);  // the next call fails at once, it does not wait out a deadline
  }
}

TEST_CASE("the master process stopped with SIGINT or SIGTERM: its peers are told, and fail with MASTER_LOST at once "
          "despite their reconnect window",
          "[process][failure]") {
  const int signal_number = GENERATE(SIGINT, SIGTERM);
  INFO("signal " << signal_number);
  ChildSet children(false);
  const MasterProcess master = start_master(children, 0, "info");
  PeerFlags flags;
  flags.peers = 2;
  flags.probe_after_fatal = true;  // the library's default window: 300 s, which a silent close would wait out
  std::vector<Child*> peers = running_peers(children, master.address, flags);

  const double stopped_at = monotonic_s();
  REQUIRE(::kill(master.child->pid(), signal_number) == 0);
  const bool ended = children.pump_until(
      [&] { return std::none_of(peers.begin(), peers.end(), [](const Child* p) { return p->running(); }); },
      Clock::now() + std::chrono::seconds(60));  // a hang-deadline, far below the window
  INFO(describe(peers) << "--- the master:\n" << master.child->err_tail(10));
  REQUIRE(ended);
  for (const Child* p : peers) {
    CHECK(p->exit_code() == std::optional<int>(3));
    const auto failure = first_failure_after(*p, stopped_at);
    REQUIRE(failure.has_value());
    CHECK(failure->result == FERRY_ERR_MASTER_LOST);
    const auto next = first_after(*p, stopped_at, "next");
    REQUIRE(next.has_value());
    CHECK(next->result == FERRY_ERR_MASTER_LOST);
    CHECK_THAT(p->err_tail(40), Catch::Contains("will not come back"));
  }
  REQUIRE(children.pump_until([&] { return !master.child->running(); }, Clock::now() + std::chrono::seconds(15)));
  CHECK_THAT(master.child->err_tail(40), Catch::Contains("told it is gone for good"));
}

TEST_CASE("the master process SIGKILLed and started again on its port: every peer carries on in its place, no "
          "process restarted",
          "[process][failure][resume]") {
  ChildSet children(false);
  MasterProcess master = start_master(children);
  PeerFlags flags;
  flags.mode = "retry";  // ferry_allreduce_multiple_with_retry, as a training loop would call it
  std::vector<Child*> peers = running_peers(children, master.address, flags);

  REQUIRE(::kill(master.child->pid(), SIGKILL) == 0);
  // Down for a second: every peer notices and dials it again meanwhile.
  children.pump_until([] { return false; }, Clock::now() + std::chrono::seconds(1));
  const double restarted_at = monotonic_s();
  master = start_master(children, master.port);
  // Each peer completes three all-reduces in the full world after the restart.
  auto recovered = [&](const Child* p) {
    size_t ok = 0;
    for (const OpLine& op : op_lines(p->out())) ok += op.kind == "op" && op.t >= restarted_at && op.result == FERRY_OK;
    return ok >= 3;
  };
  const bool done = children.pump_until(
      [&] { return std::all_of(peers.begin(), peers.end(), recovered); }, Clock::now() + std::chrono::seconds(90));
  INFO(describe(peers) << "--- the new master:\n" << master.child->err_tail(20));
  REQUIRE(done);
  for (const Child* p : peers) {
    CHECK(p->running());  // nobody gave up or was restarted
    for (const OpLine& op : op_lines(p->out())) {
      if (op.kind != "op" || op.t < restarted_at || op.result != FERRY_OK) continue;
      CHECK(op.world == 3);
      CHECK(op.value == 3.0);
      CHECK(op.uniform == 1);
    }
    // Nothing fatal on the way: a lost master costs retryable failures only.
    for (const OpLine& op : op_lines(p->out())) CHECK((op.result == FERRY_OK || op.result == FERRY_ERR_PEER_LOST));
  }
}
