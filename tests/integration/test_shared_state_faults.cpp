// A holder that dies in the middle of a shared-state transfer, as a real
// process (SIGKILL). The point of death is made deterministic by the chaos
// proxy: the doomed holder's listener sits behind a paced route, so its
// chunks trickle out, and it is killed once a given number of chunk bytes
// has passed through that route. Every peer is a ferry-test-peer in
// --mode sync: one sync of a tensor "w", reported on a "sync" line.
#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "chaos_proxy.h"
#include "child_process.h"  // tools/common
#include "harness.h"
#include "peer_process_output.h"
#include "stranger_crowd.h"  // free_loopback_port

using namespace ferry::test;
using ferry::chaos::ChaosProxy;
using ferry::chaos::ProxyClock;
using ferry::tooling::Child;
using ferry::tooling::ChildSet;
using ferry::tooling::Clock;

namespace {

constexpr uint64_t kChunk = 4u << 20;  // one fetch chunk (shared_state_sync.cpp)

struct SyncPeer {
  std::string name;
  uint64_t revision = 0;  // 0: receives; else holds the pattern at this revision
};

bool all_ready(const std::vector<Child*>& peers) {
  return std::all_of(peers.begin(), peers.end(), [](const Child* p) { return p->out().find("ready ") != std::string::npos; });
}

std::optional<OpLine> sync_line(const Child& child) {
  for (const OpLine& op : op_lines(child.out()))
    if (op.kind == "sync") return op;
  return std::nullopt;
}

// One sync among processes: peers[0] is the doomed holder, its listener
// behind a proxy route paced at 16 MB/s (a quarter second per chunk), the
// others on plain loopback.
struct DoomedHolderRun {
  EmbeddedMaster master;
  ChaosProxy proxy{1};
  ChildSet children{false};
  std::vector<Child*> peers;

  DoomedHolderRun(const std::vector<SyncPeer>& who, size_t mib) {
    const uint16_t port = free_loopback_port();
    const uint16_t route = proxy.add_route(port);
    proxy.shape(route, {std::chrono::milliseconds(0), 16u << 20}, ProxyClock::now() + std::chrono::hours(1));
    for (size_t i = 0; i < who.size(); ++i) {
      std::vector<std::string> argv = {FERRY_TEST_PEER_BIN, "--master", master.address(), "--peers",
                                       std::to_string(who.size()), "--mode", "sync", "--shared-mib", std::to_string(mib),
                                       "--revision", std::to_string(who[i].revision), "--timeout-ms", "170000"};
      if (i == 0) argv.insert(argv.end(), {"--p2p-port", std::to_string(port), "--advertised-port", std::to_string(route)});
      peers.push_back(&children.spawn(who[i].name, argv));
    }
  }

  // Kills the doomed holder once `bytes` more have passed through its route
  // than when every peer was ready; returns how many had at the kill. The
  // deadline only turns a hang into a failure: under a sanitizer, with other
  // tests beside it, filling and hashing 1 GiB in each holder took over 60 s.
  uint64_t kill_after_bytes(uint64_t bytes) {
    const auto deadline = Clock::now() + std::chrono::seconds(170);
    const bool ready = children.pump_until([&] { return all_ready(peers); }, deadline);
    INFO(describe(peers));
    REQUIRE(ready);
    const uint64_t mark = proxy.stats().bytes;
    Child& doomed = *peers[0];
    const bool relayed = children.pump_until([&] { return proxy.stats().bytes >= mark + bytes || !doomed.running(); }, deadline);
    INFO(describe(peers) << "relayed: " << proxy.stats().bytes - mark);
    REQUIRE(relayed);
    REQUIRE(doomed.running());  // it must die mid-transfer, not after
    REQUIRE(::kill(doomed.pid(), SIGKILL) == 0);
    return proxy.stats().bytes - mark;
  }

  // Waits until every peer but the doomed one has exited.
  bool survivors_done(std::chrono::seconds limit) {
    return children.pump_until(
        [&] { return std::all_of(peers.begin() + 1, peers.end(), [](const Child* p) { return !p->running(); }); },
        Clock::now() + limit);
  }
};

}  // namespace

TEST_CASE("shared state: a holder SIGKILLed after 2 chunks of a 1 GiB transfer: the sync completes from the other "
          "holder, exact",
          "[shared_state][process][failure]") {
  constexpr size_t kMib = 1024;
  DoomedHolderRun run({{"doomed holder", 5}, {"holder", 5}, {"newcomer", 0}}, kMib);
  const uint64_t relayed = run.kill_after_bytes(2 * kChunk);
  const bool done = run.survivors_done(std::chrono::seconds(120));
  INFO(describe(run.peers) << "relayed at the kill: " << relayed);
  REQUIRE(done);
  CHECK(relayed < kMib << 20);
  for (const Child* p : {run.peers[1], run.peers[2]}) {
    const auto line = sync_line(*p);
    REQUIRE(line);
    CHECK(line->result == FERRY_OK);
    CHECK(line->revision == 5);
    CHECK(line->exact == 1);
  }
  // Everything arrived, part of it twice over in the worst case: never less than the tensor.
  CHECK(sync_line(*run.peers[2])->received >= uint64_t{kMib} << 20);
}

TEST_CASE("shared state: the only holder SIGKILLed mid-transfer: every fetcher fails with PEER_LOST, revision unchanged",
          "[shared_state][process][failure]") {
  DoomedHolderRun run({{"doomed holder", 5}, {"newcomer 1", 0}, {"newcomer 2", 0}}, 256);
  run.kill_after_bytes(2 * kChunk);
  const bool done = run.survivors_done(std::chrono::seconds(60));
  INFO(describe(run.peers));
  REQUIRE(done);
  for (const Child* p : {run.peers[1], run.peers[2]}) {
    const auto line = sync_line(*p);
    REQUIRE(line);
    CHECK(line->result == FERRY_ERR_PEER_LOST);
    CHECK(line->revision == 0);
  }
}
