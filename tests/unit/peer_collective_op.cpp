// CollectiveOp's handshake with the master, driven by hand: a fake host records
// what would go to the master, and check_deadlines gets the time it is told.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "peer/collective_op.h"

using namespace ferry;
using namespace ferry::peer;
using namespace std::chrono_literals;

namespace {

struct RecordingHost : OpHost {
  std::vector<Status> ends;
  int finished = 0;
  void send_end(uint64_t, uint32_t, const Status& status) override { ends.push_back(status); }
  void op_started(uint32_t) override {}
  void op_finished(uint32_t) override { ++finished; }
};

// A collective whose "transfer" the test drives: go starts it, and by default
// it is done locally at once.
struct BareOp : CollectiveOp {
  BareOp(OpHost& host, uint64_t epoch, uint32_t seq, OpDeadlines deadlines, bool transfer_done_at_go = true)
      : CollectiveOp(host, epoch, seq, deadlines), done_at_go(transfer_done_at_go) {}
  void go() override {
    REQUIRE(begin_running());
    if (done_at_go) mark_local_done();
  }
  void stop_transfers(const Status&) override { ++stopped; }
  void moved_bytes() { progressed(); }
  void transfer_done() { mark_local_done(); }
  Status result() { return wait_finished(); }
  using CollectiveOp::timeline;
  bool done_at_go;
  int stopped = 0;
};

constexpr OpDeadlines kDeadlines{10s, 10s, 1s};

}  // namespace

// The chaos run found a split outcome: one member concluded "timeout" on its
// own while the master, once a slower member ended, committed for the others.
TEST_CASE("collective op: a late verdict asks the master to abort and takes whatever verdict comes", "[peer]") {
  RecordingHost host;
  BareOp op(host, 1, 7, kDeadlines);
  op.go();
  REQUIRE(host.ends.size() == 1);
  CHECK(host.ends[0].ok());
  auto ended = Clock::now();

  op.check_deadlines(ended + 500ms);
  CHECK(host.ends.size() == 1);  // still within the verdict deadline

  op.check_deadlines(ended + 1500ms);
  REQUIRE(host.ends.size() == 2);
  CHECK(host.ends[1].code == Errc::timeout);
  CHECK_FALSE(op.finished());  // asked, not concluded: the master decides

  op.check_deadlines(ended + 1800ms);
  CHECK(host.ends.size() == 2);  // asked once
  CHECK_FALSE(op.finished());

  SECTION("a commit that won the race is the outcome") {
    op.verdict(Status::success());
    REQUIRE(op.finished());
    CHECK(op.result().ok());
  }
  SECTION("the abort the member asked for is the outcome") {
    op.verdict(Status::failure(Errc::timeout, "peer 3: no verdict"));
    REQUIRE(op.finished());
    CHECK(op.result().code == Errc::timeout);
  }
  SECTION("a master silent for a second period: the member concludes alone") {
    op.check_deadlines(ended + 2600ms);
    REQUIRE(op.finished());
    CHECK(op.result().code == Errc::timeout);
    CHECK(host.ends.size() == 2);
    op.verdict(Status::success());  // a verdict after that changes nothing
    CHECK(op.result().code == Errc::timeout);
  }
  CHECK(host.finished == 1);
  CHECK(op.stopped == 0);  // nothing was running any more
}

TEST_CASE("collective op: told the others still run, a member that ended waits another period, and again",
          "[peer]") {
  RecordingHost host;
  BareOp op(host, 1, 7, kDeadlines);
  op.go();
  auto ended = Clock::now();
  op.check_deadlines(ended + 1500ms);
  REQUIRE(host.ends.size() == 2);  // asked for the verdict
  // The master: the others are still running (wire::CollectivePending). The wait
  // starts again now (the op's own clock), so within a period nothing is asked.
  op.still_pending();
  auto told = Clock::now();
  op.check_deadlines(told + 900ms);
  CHECK(host.ends.size() == 2);
  // Where a master silent since the ask meant concluding alone, it asks again instead.
  op.check_deadlines(ended + 2600ms);
  CHECK_FALSE(op.finished());
  REQUIRE(host.ends.size() == 3);
  CHECK(host.ends[2].code == Errc::timeout);
  op.still_pending();
  op.verdict(Status::success());  // the slow member ended: committed for all
  REQUIRE(op.finished());
  CHECK(op.result().ok());
}

TEST_CASE("collective op: the timeline splits the time into start, stalls and commit", "[peer]") {
  RecordingHost host;
  BareOp op(host, 1, 7, kDeadlines, false);
  std::this_thread::sleep_for(40ms);  // the other peers are late: no go yet
  op.go();
  op.moved_bytes();
  std::this_thread::sleep_for(60ms);  // the transfer stalls
  op.check_deadlines(Clock::now());
  op.moved_bytes();
  op.transfer_done();
  std::this_thread::sleep_for(30ms);  // the verdict takes a while
  op.verdict(Status::success());
  REQUIRE(op.result().ok());
  OpTimeline t = op.timeline();
  CHECK(t.start_s >= 0.04);
  CHECK(t.longest_stall_s >= 0.06);
  CHECK(t.commit_s >= 0.03);
  CHECK(t.duration_s >= t.start_s + t.longest_stall_s + t.commit_s);
}

// The wait's last-resort cap once counted from the call: a transfer that kept
// moving past it came back as "never finished" though nothing was wrong.
TEST_CASE("collective op: a slow transfer that keeps progressing is waited out, however long", "[peer]") {
  RecordingHost host;
  const OpDeadlines tight{10ms, 200ms, 10ms, 10ms};  // the cap: 240 ms without progress
  BareOp op(host, 1, 7, tight, false);
  op.go();
  std::thread transfer([&] {
    for (int i = 0; i < 60; ++i) {  // 600 ms of slow but steady progress
      std::this_thread::sleep_for(10ms);
      op.moved_bytes();
    }
    op.transfer_done();
    op.verdict(Status::success());
  });
  Status result = op.result();
  transfer.join();
  CHECK(result.ok());
  CHECK(op.timeline().duration_s >= 0.6);
}

// Found by killing the master under retry loops: a neighbour that lost the
// master first closed the ring, and a member that had already ended ok
// stopped counting as awaiting the verdict, so its resume record left it out
// and it waited out two verdict deadlines for a verdict nobody would send.
TEST_CASE("collective op: ended ok, it awaits the master's verdict whatever fails locally afterwards", "[peer]") {
  RecordingHost host;
  BareOp op(host, 1, 7, kDeadlines, /*transfer_done_at_go=*/false);
  CHECK_FALSE(op.awaiting_verdict());  // issued
  op.go();
  CHECK_FALSE(op.awaiting_verdict());  // running
  op.transfer_done();
  CHECK(op.awaiting_verdict());
  op.fail_local(Status::failure(Errc::peer_lost, "link from the previous peer closed"));
  CHECK(op.awaiting_verdict());  // the master may still have committed it
  REQUIRE(host.ends.size() == 1);  // the end(ok) only: a failure after it tells the master nothing
  op.verdict(Status::success());
  CHECK_FALSE(op.awaiting_verdict());
  CHECK(op.result().ok());
}

TEST_CASE("collective op: failed before its end, it awaits no verdict", "[peer]") {
  RecordingHost host;
  BareOp op(host, 1, 8, kDeadlines, /*transfer_done_at_go=*/false);
  op.go();
  op.fail_local(Status::failure(Errc::peer_lost, "link from the previous peer closed"));
  CHECK_FALSE(op.awaiting_verdict());
}
