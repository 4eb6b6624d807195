#include "peer/resume_record.h"

#include <algorithm>

namespace ferry::peer {

void ResumeRecord::committed(uint64_t epoch, uint32_t seq, std::optional<uint64_t> revision) {
  if (revision) revision_ = revision;
  if (epoch != commits_epoch_) {
    commits_epoch_ = epoch;
    recent_commits_.clear();
  }
  recent_commits_.insert(seq);
  if (recent_commits_.size() > kRecentCommits) recent_commits_.erase(recent_commits_.begin());
}

std::vector<wire::SeqRange> ResumeRecord::awaited_ranges(std::vector<uint32_t> seqs) {
  std::sort(seqs.begin(), seqs.end());
  return wire::seq_ranges(seqs);
}

std::optional<std::string> ResumeRecord::too_large(const Snapshot& now) {
  if (now.ring.size() > wire::kMaxResumeRing)
    return "its ring of " + std::to_string(now.ring.size()) + " members is more than a resume record holds (" +
           std::to_string(wire::kMaxResumeRing) + ")";
  if (size_t n = awaited_ranges(now.awaiting).size(); n > wire::kMaxResumeRanges)
    return "the collectives awaiting a verdict here form " + std::to_string(n) +
           " runs of numbers, more than a resume record holds (" + std::to_string(wire::kMaxResumeRanges) + ")";
  return std::nullopt;
}

void ResumeRecord::fill(wire::Hello& hello, const Snapshot& now) const {
  hello.resume_peer_id = now.peer_id;
  hello.resume_epoch = now.epoch;
  hello.resume_ring = now.ring;
  hello.resume_revision = revision_ ? *revision_ + 1 : 0;
  hello.resume_committed.clear();
  if (commits_epoch_ == now.epoch) {
    // The latest ranges: a collective another member awaits is among the last this one saw committed.
    auto committed = wire::seq_ranges(std::vector<uint32_t>(recent_commits_.begin(), recent_commits_.end()));
    const size_t keep = std::min(committed.size(), wire::kMaxResumeRanges);
    hello.resume_committed.assign(committed.end() - static_cast<std::ptrdiff_t>(keep), committed.end());
  }
  hello.resume_awaiting = awaited_ranges(now.awaiting);
}

}  // namespace ferry::peer
