// OpRegistry: one table and one owner of a collective's life cycle, driven by
// hand with a stand-in collective (no sockets, no master).
#include <catch2/catch.hpp>

#include <future>
#include <stdexcept>
#include <thread>

#include "peer/op_registry.h"

using namespace ferry;
using namespace ferry::peer;
using namespace std::chrono_literals;

namespace {

struct StandInOp final : CollectiveOp, ChunkConsumer {
  StandInOp(OpHost& host, uint64_t epoch, uint32_t seq) : CollectiveOp(host, epoch, seq, OpDeadlines{}) {}
  void go() override {
    if (begin_running()) accept_chunks();
  }
  void stop_transfers(const Status&) override {}
  Status payload_destination(const wire::ChunkHeader&, uint32_t, std::vector<uint8_t>&, uint8_t*&) override { return {}; }
  Status payload_received(const wire::ChunkHeader&, uint32_t, const uint8_t*) override { return {}; }
  void payload_abandoned() override {}
  void chunk_sent(size_t) override {}
  void chunk_dropped() override {}
  void links_failed(const Status& why) override { links_failure = why; }
  Status links_failure;
};

// Ring links are named by address only: two distinct addresses stand for two link sets.
const char kLinkSetA = 0, kLinkSetB = 0;
const auto* links_a = reinterpret_cast<const RingLinks*>(&kLinkSetA);
const auto* links_b = reinterpret_cast<const RingLinks*>(&kLinkSetB);

std::shared_ptr<StandInOp> issue_only(OpRegistry& ops, const RingLinks* links = links_a) {
  return ops.issue<StandInOp>([&](uint64_t epoch, uint32_t seq) { return std::make_shared<StandInOp>(ops, epoch, seq); },
                              links);
}

// As the communicator issues: register, send the begin, then let the end go.
std::shared_ptr<StandInOp> issue(OpRegistry& ops, const RingLinks* links = links_a) {
  auto op = issue_only(ops, links);
  ops.release_end(op->seq());
  return op;
}

}  // namespace

TEST_CASE("op registry: numbers count up from 0 and restart with each ring", "[peer]") {
  std::vector<wire::CollectiveEnd> ends;
  OpRegistry ops([&](const wire::CollectiveEnd& end) { ends.push_back(end); });
  ops.restart(3);
  auto a = issue(ops), b = issue(ops);
  CHECK(a->seq() == 0);
  CHECK(b->seq() == 1);
  CHECK(a->epoch() == 3);
  CHECK(ops.find(3, 1) == b);
  CHECK(ops.size() == 2);

  // Both issued ops fail so they finish and leave the table; a new ring numbers from 0 again.
  a->fail_local(Status::failure(Errc::peer_lost, "gone"), true);
  b->fail_local(Status::failure(Errc::peer_lost, "gone"), true);
  CHECK(ops.wait_empty(Clock::now() + 1s));
  ops.restart(4);
  auto c = issue(ops);
  CHECK(c->seq() == 0);
  CHECK(c->epoch() == 4);
  CHECK(ops.find(3, 0) == nullptr);  // a message for the old ring finds nothing
}

TEST_CASE("op registry: a refused issue leaves the numbering where it was", "[peer]") {
  OpRegistry ops([](const wire::CollectiveEnd&) {});
  auto first = issue(ops);
  CHECK_THROWS_AS(ops.issue<StandInOp>([](uint64_t, uint32_t) -> std::shared_ptr<StandInOp> {
    throw Error(Errc::invalid_argument, "refused");
  }, links_a), Error);
  CHECK(ops.size() == 1);
  CHECK(issue(ops)->seq() == first->seq() + 1);
}

TEST_CASE("op registry: an op's end goes to the master with its epoch and number", "[peer]") {
  std::vector<wire::CollectiveEnd> ends;
  OpRegistry ops([&](const wire::CollectiveEnd& end) { ends.push_back(end); });
  ops.restart(9);
  issue(ops);
  auto op = issue(ops);
  op->fail_local(Status::failure(Errc::timeout, "slow"));
  REQUIRE(ends.size() == 1);
  CHECK(ends[0].epoch == 9);
  CHECK(ends[0].seq == 1);
  CHECK(ends[0].code == static_cast<uint32_t>(Errc::timeout));
}

TEST_CASE("op registry: a lane's chunk waits for its collective's go", "[peer]") {
  OpRegistry ops([](const wire::CollectiveEnd&) {});
  std::atomic<bool> closed{false};
  auto op = issue(ops);
  auto lookup = std::async(std::launch::async, [&] { return ops.wait_started(op->seq(), links_a, closed); });
  CHECK(lookup.wait_for(50ms) == std::future_status::timeout);  // issued, not started: it waits
  op->go();
  REQUIRE(lookup.wait_for(5s) == std::future_status::ready);
  auto found = lookup.get();
  CHECK(found.consumer.get() == static_cast<ChunkConsumer*>(op.get()));
}

TEST_CASE("op registry: chunks for unknown collectives or other links are refused", "[peer]") {
  OpRegistry ops([](const wire::CollectiveEnd&) {});
  std::atomic<bool> closed{false};
  auto op = issue(ops, links_a);
  op->go();
  auto unknown = ops.wait_started(7, links_a, closed);
  CHECK_FALSE(unknown.consumer);
  CHECK(unknown.error.code == Errc::protocol);
  auto elsewhere = ops.wait_started(op->seq(), links_b, closed);
  CHECK_FALSE(elsewhere.consumer);
  CHECK(elsewhere.error.code == Errc::protocol);
}

TEST_CASE("op registry: closing links wakes their lanes and fails only their collectives", "[peer]") {
  OpRegistry ops([](const wire::CollectiveEnd&) {});
  std::atomic<bool> closed_a{false};
  auto on_a = issue(ops, links_a);
  auto on_b = issue(ops, links_b);
  auto lookup = std::async(std::launch::async, [&] { return ops.wait_started(on_a->seq(), links_a, closed_a); });
  CHECK(lookup.wait_for(50ms) == std::future_status::timeout);
  closed_a.store(true);
  ops.links_closed(links_a, Status::failure(Errc::peer_lost, "reset"));
  REQUIRE(lookup.wait_for(5s) == std::future_status::ready);
  CHECK(lookup.get().error.code == Errc::peer_lost);
  CHECK(on_a->links_failure.code == Errc::peer_lost);
  CHECK(on_b->links_failure.ok());
}

// Seen under TSan: a link failure failed a just-issued op, and its end reached the master before
// the issuing thread had sent the begin; the master kicked the peer ("collective 3 ended before it
// began").
TEST_CASE("op registry: an end waits until the issuer has sent the begin", "[peer]") {
  std::vector<wire::CollectiveEnd> ends;
  OpRegistry ops([&](const wire::CollectiveEnd& end) { ends.push_back(end); });
  ops.restart(2);
  auto op = issue_only(ops);
  op->fail_local(Status::failure(Errc::peer_lost, "link reset"));
  CHECK(ends.empty());  // the begin has not gone yet
  op->fail_local(Status::failure(Errc::timeout, "a later failure"));
  ops.release_end(op->seq());
  REQUIRE(ends.size() == 1);  // the held end, once, and the first reason
  CHECK(ends[0].seq == op->seq());
  CHECK(ends[0].code == static_cast<uint32_t>(Errc::peer_lost));
  ops.release_end(op->seq());
  CHECK(ends.size() == 1);

  auto next = issue(ops);  // released at once: its end goes straight to the master
  next->fail_local(Status::failure(Errc::timeout, "slow"));
  REQUIRE(ends.size() == 2);
  CHECK(ends[1].seq == next->seq());
}
