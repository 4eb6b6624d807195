// The invariant checker and the peers' line protocol, without processes.
#include <catch2/catch.hpp>

#include "chaos_data.h"
#include "invariants.h"
#include "peer_lines.h"

using namespace ferry::chaos;

namespace {

OpReport ok(const std::string& peer, std::uint64_t id, const std::string& hash, std::vector<std::uint64_t> ring = {1, 2}) {
  OpReport r;
  r.peer = peer;
  r.peer_id = id;
  r.step = 7;
  r.k = 1;
  r.epoch = 3;
  r.ring = std::move(ring);
  r.hash = hash;
  r.t0 = 10;
  r.t1 = 11;
  return r;
}

CheckerConfig config(ferry_quant quant = FERRY_QUANT_NONE) {
  return CheckerConfig{quant, OpDeadlines{15, 10, 25, 80},
                       [](std::uint64_t, std::uint32_t, const std::vector<std::uint64_t>&) { return std::string("good"); },
                       [](std::uint64_t revision) { return "state" + std::to_string(revision); }};
}

// A report of the shared-state sync (epoch 3, step 10); a success's hash is the reference's unless given.
SyncReport synced(const std::string& peer, std::uint64_t id, std::uint64_t revision, std::string hash = "",
                  std::uint64_t epoch = 3) {
  SyncReport r;
  r.peer = peer;
  r.peer_id = id;
  r.step = 10;
  r.epoch = epoch;
  r.revision = revision;
  r.hash = hash.empty() ? "state" + std::to_string(revision) : hash;
  return r;
}

SyncReport sync_failed(const std::string& peer, std::uint64_t id, ferry_result result) {
  SyncReport r = synced(peer, id, 0, "-");
  r.result = result;
  return r;
}

}  // namespace

TEST_CASE("identical successes equal to the reference pass", "[chaos][invariants]") {
  InvariantChecker c(config());
  c.add(ok("a", 1, "good"));
  c.add(ok("b", 2, "good"));
  c.settle_all();
  CHECK(c.violations().empty());
  CHECK(c.ops_checked() == 1);
  CHECK(c.references_checked() == 1);
}

TEST_CASE("differing bits, a wrong reference, a foreign ring and a split outcome are violations",
          "[chaos][invariants]") {
  SECTION("peers disagree") {
    InvariantChecker c(config());
    c.add(ok("a", 1, "good"));
    c.add(ok("b", 2, "bad"));
    c.settle_all();
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("got hash bad"));
  }
  SECTION("all agree on a wrong value") {
    InvariantChecker c(config());
    c.add(ok("a", 1, "bad"));
    c.add(ok("b", 2, "bad"));
    c.settle_all();
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("differs from the reference"));
  }
  SECTION("success outside its own ring") {
    InvariantChecker c(config());
    c.add(ok("a", 9, "good"));
    CHECK(c.violation_count() == 1);
  }
  SECTION("success next to a retryable failure") {
    InvariantChecker c(config());
    c.add(ok("a", 1, "good"));
    OpReport failed = ok("b", 2, "-");
    failed.result = FERRY_ERR_PEER_LOST;
    c.add(failed);
    c.settle_all();
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("but failed on b"));
  }
  SECTION("a peer removed from the run may fail where others succeed") {
    InvariantChecker c(config());
    c.add(ok("a", 1, "good"));
    OpReport kicked = ok("b", 2, "-");
    kicked.result = FERRY_ERR_KICKED;
    c.add(kicked);
    c.settle_all();
    CHECK(c.violation_count() == 0);
  }
  SECTION("each phase is held to its own deadline, the whole op to the hang bound") {
    InvariantChecker c(config());
    OpReport slow = ok("a", 1, "good");
    slow.t1 = slow.t0 + 60;  // a long transfer that kept moving is no breach
    slow.start_s = 14;
    slow.stall_s = 9;
    slow.commit_s = 24;
    c.add(slow);
    CHECK(c.violation_count() == 0);
    for (auto [field, phase] : {std::pair{&OpReport::start_s, "its start"}, std::pair{&OpReport::stall_s, "a stall"},
                                std::pair{&OpReport::commit_s, "its commit"}}) {
      OpReport late = slow;
      late.*field += 2;
      CHECK(deadline_breach(late, OpDeadlines{15, 10, 25, 80}).value_or("").find(phase) == 0);
    }
    slow.t1 = slow.t0 + 81;
    c.add(slow);
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("the whole op took 81.0 s"));
  }
}

TEST_CASE("one (epoch, step, k) in two rings is two ops: a restarted master's new group counts epochs from 1 again",
          "[chaos][invariants]") {
  InvariantChecker c(config());
  c.add(ok("a", 1, "good"));
  OpReport other_group = ok("c", 5, "-", {5, 6});
  other_group.result = FERRY_ERR_PEER_LOST;
  c.add(other_group);
  c.settle_all();
  CHECK(c.violations().empty());
  CHECK(c.ops_checked() == 2);
}

TEST_CASE("quantized ops are held to the error bound, not the reference hash", "[chaos][invariants]") {
  InvariantChecker c(config(FERRY_QUANT_U8));
  OpReport a = ok("a", 1, "q"), b = ok("b", 2, "q");
  a.error = quant_error_bound(FERRY_QUANT_U8, 2) / 2;
  b.error = a.error;
  c.add(a);
  c.add(b);
  c.settle_all();
  CHECK(c.violation_count() == 0);
  OpReport far = ok("c", 1, "q");
  far.error = quant_error_bound(FERRY_QUANT_U8, 2) * 2;
  c.add(far);
  CHECK(c.violation_count() == 1);
}

TEST_CASE("settle checks only ops whose reports are all old enough", "[chaos][invariants]") {
  InvariantChecker c(config());
  c.add(ok("a", 1, "good"));
  c.settle(5);
  CHECK(c.ops_checked() == 0);
  c.add(ok("b", 2, "bad"));
  c.settle(12);
  CHECK(c.ops_checked() == 1);
  CHECK(c.violation_count() == 1);
}

TEST_CASE("an op is checked as soon as every member of its ring has reported", "[chaos][invariants]") {
  InvariantChecker c(config());
  c.add(ok("a", 1, "good", {1, 2, 3}));
  OpReport failed = ok("c", 3, "-", {1, 2, 3});
  failed.result = FERRY_ERR_KICKED;
  c.add(failed);
  CHECK(c.ops_checked() == 0);  // peer 2 has not reported yet
  c.add(ok("b", 2, "bad", {1, 2, 3}));
  CHECK(c.ops_checked() == 1);
  CHECK(c.violation_count() == 1);
  c.settle_all();
  CHECK(c.ops_checked() == 1);
}

TEST_CASE("shared-state syncs that leave the reference bytes at one revision pass", "[chaos][invariants]") {
  InvariantChecker c(config());
  c.add_sync(synced("a", 1, 4));
  c.add_sync(synced("b", 2, 4));
  c.add_sync(synced("a", 1, 5, "", 4));  // the next sync, in the next epoch
  c.add_sync(sync_failed("c", 3, FERRY_ERR_KICKED));  // removed from the run: not a split outcome
  SyncReport other_sync = sync_failed("c", 3, FERRY_ERR_PEER_LOST);
  other_sync.step = 15;
  c.add_sync(other_sync);
  CHECK(c.violations().empty());
  CHECK(c.syncs_checked() == 5);
}

TEST_CASE("one (epoch, step) sync in two rings is two syncs: lone newcomers of restarted masters",
          "[chaos][invariants]") {
  InvariantChecker c(config());
  SyncReport first = synced("a", 1, 0);
  first.ring = {1};
  first.t1 = 100;
  SyncReport other = sync_failed("b", 2, FERRY_ERR_INVALID_USAGE);
  other.ring = {2};
  other.t1 = 160;  // within the hang bound of the first
  c.add_sync(first);
  c.add_sync(other);
  CHECK(c.violations().empty());
}

TEST_CASE("a sync's wrong bytes, split revisions, split outcome or a revision going back are violations",
          "[chaos][invariants]") {
  InvariantChecker c(config());
  SECTION("bytes other than the revision's") {
    c.add_sync(synced("a", 1, 4, "state3"));
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("not the reference state4"));
  }
  SECTION("two revisions out of one sync") {
    c.add_sync(synced("a", 1, 4));
    c.add_sync(synced("b", 2, 5));
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("b ended at revision 5"));
  }
  SECTION("a success, then a failure of the same sync") {
    c.add_sync(synced("a", 1, 4));
    c.add_sync(sync_failed("b", 2, FERRY_ERR_PEER_LOST));
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("succeeded on a but failed on b"));
  }
  SECTION("a failure, then a success of the same sync") {
    c.add_sync(sync_failed("b", 2, FERRY_ERR_TIMEOUT));
    c.add_sync(synced("a", 1, 4));
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("succeeded on a but failed on b"));
  }
  SECTION("reports of one name far apart in time are of two syncs (a new master counts epochs from 1 again)") {
    SyncReport early = synced("a", 1, 4), late = synced("b", 2, 9);
    early.t1 = 100;
    late.t1 = 100 + 81;  // past the hang bound (80 s)
    c.add_sync(early);
    c.add_sync(late);
    CHECK(c.violation_count() == 0);
  }
  SECTION("a peer's revision going back") {
    c.add_sync(synced("a", 1, 6));
    c.add_sync(synced("a", 1, 5, "", 4));
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("went back from 6 to 5"));
  }
}

TEST_CASE("state lines parse into sync reports, malformed ones are refused", "[chaos][lines]") {
  auto line =
      parse_peer_line("state step=10 epoch=3 ring=3,5 result=0 revision=4 hash=abc received=16384 t0=1.5 t1=1.6");
  REQUIRE(line);
  auto r = sync_report(*line);
  REQUIRE(r);
  CHECK(r->step == 10);
  CHECK(r->epoch == 3);
  CHECK(r->result == 0);
  CHECK(r->revision == 4);
  CHECK(r->hash == "abc");
  CHECK(r->received == 16384);
  CHECK(r->t1 == 1.6);
  CHECK(r->ring == std::vector<std::uint64_t>{3, 5});
  CHECK_FALSE(sync_report(*parse_peer_line("state step=10 epoch=3 ring=3,x result=0 revision=4 received=1 t1=2")));
  CHECK_FALSE(sync_report(*parse_peer_line("state step=10 epoch=3 result=0 hash=abc received=1")));
  CHECK_FALSE(sync_report(*parse_peer_line("state step=10 epoch=3 result=0 revision=4 hash=abc received=1")));
  CHECK_FALSE(sync_report(*parse_peer_line("state step=x epoch=3 result=0 revision=4 received=1")));
  CHECK_FALSE(sync_report(*parse_peer_line("op step=10 epoch=3 result=0 revision=4 received=1")));
}

TEST_CASE("the shared state's content depends on the revision and the seed only", "[chaos][data]") {
  CHECK(state_content(1, 4) == state_content(1, 4));
  CHECK(state_content(1, 4) != state_content(1, 5));
  CHECK(state_content(2, 4) != state_content(1, 4));
  CHECK(state_content(1, 4).size() == kStateFloats);
}

TEST_CASE("op lines parse into reports, malformed ones are refused", "[chaos][lines]") {
  auto line = parse_peer_line(
      "op step=4 k=1 epoch=9 ring=3,5,8 result=0 hash=00ff err=0 t0=1.5 t1=2.25 start=0.5 stall=0.125 commit=0.25");
  REQUIRE(line);
  auto r = op_report(*line);
  REQUIRE(r);
  CHECK(r->step == 4);
  CHECK(r->k == 1);
  CHECK(r->epoch == 9);
  CHECK(r->ring == std::vector<std::uint64_t>{3, 5, 8});
  CHECK(r->hash == "00ff");
  CHECK(r->t1 == 2.25);
  CHECK(r->start_s == 0.5);
  CHECK(r->stall_s == 0.125);
  CHECK(r->commit_s == 0.25);
  CHECK_FALSE(op_report(*parse_peer_line("op step=x k=1 epoch=9 ring=- result=0 t0=1 t1=2")));
  CHECK_FALSE(op_report(*parse_peer_line("op step=1 k=1 epoch=9 ring=1,a result=0 t0=1 t1=2")));
  CHECK_FALSE(parse_peer_line("op =3"));
}

TEST_CASE("the reference sum is the exact sum of the peers' inputs", "[chaos][data]") {
  const std::uint64_t seed = op_seed(1, 2, 0);
  std::vector<float> a(1000), b(1000);
  fill_peer_input(a.data(), a.size(), seed, 4);
  fill_peer_input(b.data(), b.size(), seed, 9);
  const auto sum = reference_sum(1000, seed, {4, 9});
  for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(sum[i] == a[i] + b[i]);
  CHECK(op_seed(1, 2, 0) != op_seed(1, 2, 1));
  CHECK(op_seed(1, 2, 0) != op_seed(2, 2, 0));
}

TEST_CASE("an all-gather's result is checked against its reference even in a quantized run, and a wrong block "
          "is a violation",
          "[chaos][invariants][all_gather]") {
  auto gather = [](const std::string& peer, std::uint64_t id, const std::string& hash, double error = 0) {
    OpReport r = ok(peer, id, hash);
    r.k = kGatherK;
    r.error = error;
    return r;
  };
  SECTION("a quantized run: the all-reduce's reference is skipped, the all-gather's is not") {
    InvariantChecker c(config(FERRY_QUANT_U8));
    c.add(gather("a", 1, "bad"));
    c.add(gather("b", 2, "bad"));
    c.settle_all();
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("differs from the reference"));
    CHECK(c.references_checked() == 1);
  }
  SECTION("a peer saw a block that is not its member's") {
    InvariantChecker c(config());
    c.add(gather("a", 1, "good", 1));
    c.add(gather("b", 2, "good"));
    c.settle_all();
    REQUIRE(c.violation_count() == 1);
    CHECK_THAT(c.violations()[0], Catch::Contains("not its member's contribution"));
  }
}

TEST_CASE("all-gather contributions: deterministic, 0 and 1 byte among them, the reference their concatenation",
          "[chaos][all_gather]") {
  CHECK(gather_contribution(5, 9, 3, 1000) == gather_contribution(5, 9, 3, 1000));
  bool empty = false, one = false, longer = false;
  for (std::uint64_t step = 0; step < 200; ++step) {
    const auto bytes = gather_contribution(5, step, 3, 1000).size();
    CHECK(bytes <= 1000);
    empty |= bytes == 0;
    one |= bytes == 1;
    longer |= bytes > 1;
  }
  CHECK((empty && one && longer));
  auto a = gather_contribution(5, 9, 3, 1000), b = gather_contribution(5, 9, 4, 1000);
  a.insert(a.end(), b.begin(), b.end());
  CHECK(reference_gather(5, 9, {3, 4}, 1000) == a);
}
