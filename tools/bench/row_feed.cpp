#include "row_feed.h"

#include <algorithm>
#include <utility>

namespace ferry::bench {

RowFeed::RowFeed(const BenchArgs& args, RunShape shape, ReportParser parse, OnRow on_row)
    : args_(args), shape_(std::move(shape)), parse_(parse), on_row_(std::move(on_row)) {}

void RowFeed::read(const std::vector<tooling::Child*>& ranks) {
  if (!on_row_ || next_size_ >= args_.sizes.size()) return;
  whole_bytes_seen_.resize(ranks.size(), 0);
  bool grew = false;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::size_t whole = ranks[r]->out().rfind('\n') + 1;  // npos + 1 == 0: no whole line yet
    grew = grew || whole != whole_bytes_seen_[r];
    whole_bytes_seen_[r] = whole;
  }
  if (!grew) return;
  // A few short lines per rank: parsing them again is cheaper than keeping partial state.
  std::vector<std::vector<RankReport>> per_rank;
  std::size_t complete = args_.sizes.size();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    per_rank.push_back(parse_(ranks[r]->out().substr(0, whole_bytes_seen_[r]), ranks[r]->name()));
    complete = std::min(complete, per_rank.back().size());
  }
  for (; next_size_ < complete; ++next_size_) on_row_(summarize_size(args_, shape_, per_rank, next_size_));
}

}  // namespace ferry::bench
