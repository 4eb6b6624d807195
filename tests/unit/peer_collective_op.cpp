// CollectiveOp's handshake with the master, driven by hand: a fake host records
// what would go to the master, and check_deadlines gets the time it is told.
#include <catch2/catch.hpp>

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
  void op_finished(uint32_t) override { ++finished; }
};

// A collective with no transfers: started, then done locally at once.
struct BareOp : CollectiveOp {
  using CollectiveOp::CollectiveOp;
  void go() override {
    REQUIRE(begin_running());
    mark_local_done();
  }
  void stop_transfers(const Status&) override { ++stopped; }
  Status result() { return wait_finished(); }
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
