// The resume half of a peer's hello (peer/resume_record.h): what it says of
// the ring, the revision, the collectives committed and those awaited, and
// the records too large for a hello, which the peer must not cut short.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "peer/resume_record.h"

using namespace ferry;
using namespace ferry::peer;

namespace {

std::vector<wire::SeqRange> ranges(std::vector<std::pair<uint32_t, uint32_t>> runs) {
  std::vector<wire::SeqRange> out;
  for (auto [first, count] : runs) out.push_back({first, count});
  return out;
}

bool same(const std::vector<wire::SeqRange>& a, const std::vector<wire::SeqRange>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].first != b[i].first || a[i].count != b[i].count) return false;
  return true;
}

wire::Hello filled(const ResumeRecord& record, const ResumeRecord::Snapshot& now) {
  wire::Hello hello;
  record.fill(hello, now);
  return hello;
}

}  // namespace

TEST_CASE("resume record: a fresh record says who the peer is and claims no commit and no revision", "[resume]") {
  ResumeRecord record;
  wire::Hello hello = filled(record, {7, 3, {5, 7, 9}, {}});
  CHECK(hello.resume_peer_id == 7);
  CHECK(hello.resume_epoch == 3);
  CHECK(hello.resume_ring == std::vector<uint64_t>{5, 7, 9});
  CHECK(hello.resume_revision == 0);
  CHECK(hello.resume_committed.empty());
  CHECK(hello.resume_awaiting.empty());
}

TEST_CASE("resume record: the awaited collectives go as sorted runs, in any order given", "[resume]") {
  CHECK(same(ResumeRecord::awaited_ranges({9, 4, 5, 6, 11, 10}), ranges({{4, 3}, {9, 3}})));
  ResumeRecord record;
  CHECK(same(filled(record, {1, 1, {1, 2}, {3, 1, 2}}).resume_awaiting, ranges({{1, 3}})));
}

TEST_CASE("resume record: commits of the snapshot's epoch are sent, a newer epoch forgets the older's", "[resume]") {
  ResumeRecord record;
  for (uint32_t seq : {1u, 2u, 3u, 7u}) record.committed(4, seq, std::nullopt);
  CHECK(same(filled(record, {1, 4, {1, 2}, {}}).resume_committed, ranges({{1, 3}, {7, 1}})));
  // A snapshot of another epoch: these commits say nothing about it.
  CHECK(filled(record, {1, 5, {1, 2}, {}}).resume_committed.empty());
  record.committed(5, 2, std::nullopt);
  CHECK(same(filled(record, {1, 5, {1, 2}, {}}).resume_committed, ranges({{2, 1}})));
  CHECK(filled(record, {1, 4, {1, 2}, {}}).resume_committed.empty());
}

TEST_CASE("resume record: the revision held is the last committed sync's plus one, across epochs", "[resume]") {
  ResumeRecord record;
  record.committed(1, 1, 0);
  CHECK(filled(record, {1, 1, {1}, {}}).resume_revision == 1);
  record.committed(1, 2, std::nullopt);  // an all-reduce: the revision stays
  CHECK(filled(record, {1, 1, {1}, {}}).resume_revision == 1);
  record.committed(2, 1, 41);
  CHECK(filled(record, {1, 2, {1}, {}}).resume_revision == 42);
}

TEST_CASE("resume record: only the latest committed runs fit a hello, and the oldest commits are forgotten",
          "[resume]") {
  ResumeRecord record;
  // Every other number: one run each, more runs than a hello holds.
  const uint32_t runs = static_cast<uint32_t>(wire::kMaxResumeRanges) + 10;
  for (uint32_t i = 0; i < runs; ++i) record.committed(1, 2 * i, std::nullopt);
  auto committed = filled(record, {1, 1, {1}, {}}).resume_committed;
  REQUIRE(committed.size() == wire::kMaxResumeRanges);
  CHECK(committed.front().first == 2 * (runs - static_cast<uint32_t>(wire::kMaxResumeRanges)));
  CHECK(committed.back().first == 2 * (runs - 1));

  ResumeRecord many;
  const uint32_t total = static_cast<uint32_t>(ResumeRecord::kRecentCommits) + 5;
  for (uint32_t seq = 0; seq < total; ++seq) many.committed(1, seq, std::nullopt);
  // One run: the first five numbers fell out of the memory.
  CHECK(same(filled(many, {1, 1, {1}, {}}).resume_committed, ranges({{5, total - 5}})));
}

TEST_CASE("resume record: a ring or awaited set larger than a hello holds is too large, never cut", "[resume]") {
  ResumeRecord::Snapshot fits{1, 1, std::vector<uint64_t>(wire::kMaxResumeRing, 1), {}};
  for (uint32_t i = 0; i < wire::kMaxResumeRanges; ++i) fits.awaiting.push_back(2 * i);
  CHECK_FALSE(ResumeRecord::too_large(fits));

  auto big_ring = fits;
  big_ring.ring.push_back(2);
  auto why = ResumeRecord::too_large(big_ring);
  REQUIRE(why);
  CHECK(why->find("ring of " + std::to_string(wire::kMaxResumeRing + 1)) != std::string::npos);

  auto scattered = fits;
  scattered.awaiting.push_back(1'000);
  why = ResumeRecord::too_large(scattered);
  REQUIRE(why);
  CHECK(why->find(std::to_string(wire::kMaxResumeRanges + 1) + " runs") != std::string::npos);

  // Adjacent numbers are one run: many collectives, one range.
  ResumeRecord::Snapshot adjacent{1, 1, {1, 2}, {}};
  for (uint32_t seq = 0; seq < 1'000; ++seq) adjacent.awaiting.push_back(seq);
  CHECK_FALSE(ResumeRecord::too_large(adjacent));
}
