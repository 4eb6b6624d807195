#include "invariants.h"

#include <algorithm>
#include <cstdio>

#include "chaos_data.h"

namespace ferry::chaos {

namespace {

constexpr std::size_t kMaxKept = 200;

std::string op_name(std::uint64_t epoch, std::uint64_t step, std::uint32_t k) {
  return "op (epoch " + std::to_string(epoch) + ", step " + std::to_string(step) + ", k " + std::to_string(k) + ")";
}

std::string ring_text(const std::vector<std::uint64_t>& ring) {
  std::string out;
  for (std::uint64_t id : ring) {
    out += out.empty() ? "[" : ",";
    out += std::to_string(id);
  }
  return out.empty() ? "[]" : out + "]";
}

bool removed_from_run(int result) { return result == FERRY_ERR_MASTER_LOST || result == FERRY_ERR_KICKED; }

// Every member of the ring a success ran in has reported: no more reports can come.
bool all_reported(const std::vector<OpReport>& reports) {
  auto ok = std::find_if(reports.begin(), reports.end(), [](const OpReport& r) { return r.result == FERRY_OK; });
  if (ok == reports.end()) return false;
  return std::all_of(ok->ring.begin(), ok->ring.end(), [&](std::uint64_t id) {
    return std::any_of(reports.begin(), reports.end(), [id](const OpReport& r) { return r.peer_id == id; });
  });
}

}  // namespace

std::optional<std::string> deadline_breach(const OpReport& r, const OpDeadlines& d) {
  for (auto [phase, took, limit] : {std::tuple{"its start", r.start_s, d.start_s},
                                    std::tuple{"a stall", r.stall_s, d.stall_s},
                                    std::tuple{"its commit", r.commit_s, d.commit_s},
                                    std::tuple{"the whole op", r.t1 - r.t0, d.hang_s}}) {
    if (took <= limit) continue;
    char text[192];
    std::snprintf(text, sizeof text,
                  "%s took %.1f s (deadline %.0f s); it ended with result %d (start %.1f s, longest stall %.1f s, "
                  "commit %.1f s)",
                  phase, took, limit, r.result, r.start_s, r.stall_s, r.commit_s);
    return std::string(text);
  }
  return std::nullopt;
}

InvariantChecker::InvariantChecker(CheckerConfig config) : config_(std::move(config)) {}

void InvariantChecker::violation(std::string what) {
  if (violations_.size() < kMaxKept) violations_.push_back(std::move(what));
  ++violation_count_;
}

void InvariantChecker::add(const OpReport& r) {
  const std::string name = op_name(r.epoch, r.step, r.k);
  if (auto breach = deadline_breach(r, config_.deadlines)) violation(name + " on " + r.peer + ": " + *breach);
  if (r.result == FERRY_OK) {
    if (std::find(r.ring.begin(), r.ring.end(), r.peer_id) == r.ring.end())
      violation(name + " on " + r.peer + ": succeeded in ring " + ring_text(r.ring) + " without its own id " +
                std::to_string(r.peer_id));
    if (r.k == kGatherK && r.error != 0)
      violation(name + " on " + r.peer + ": a block of its all-gather is not its member's contribution");
    const double bound = quant_error_bound(config_.quant, r.ring.size());
    if (config_.quant != FERRY_QUANT_NONE && !(r.error <= bound)) {
      char text[96];
      std::snprintf(text, sizeof text, "error %.6g exceeds the %s bound %.6g", r.error, ferry_quant_name(config_.quant),
                    bound);
      violation(name + " on " + r.peer + ": " + text);
    }
  }
  const Key key{r.epoch, r.ring, r.step, r.k};
  Op& op = open_[key];
  op.reports.push_back(r);
  op.last_t = std::max(op.last_t, r.t1);
  if (all_reported(op.reports)) {
    check(key, op);
    open_.erase(key);
  }
}

void InvariantChecker::check(const Key& key, const Op& op) {
  const auto& [epoch, ring, step, k] = key;
  const std::string name = op_name(epoch, step, k);
  const OpReport* first_ok = nullptr;
  const OpReport* first_failed = nullptr;
  for (const OpReport& r : op.reports) {
    if (r.result != FERRY_OK) {
      if (!removed_from_run(r.result) && first_failed == nullptr) first_failed = &r;
      continue;
    }
    if (first_ok == nullptr) {
      first_ok = &r;
      continue;
    }
    if (r.hash != first_ok->hash)
      violation(name + ": " + r.peer + " got hash " + r.hash + ", " + first_ok->peer + " got " + first_ok->hash);
  }
  if (first_ok != nullptr && first_failed != nullptr)
    violation(name + ": succeeded on " + first_ok->peer + " but failed on " + first_failed->peer + " (" +
              ferry_strerror(static_cast<ferry_result>(first_failed->result)) + ")");
  // An all-gather moves bytes unchanged, quantized run or not: its reference always holds.
  if (first_ok != nullptr && (config_.quant == FERRY_QUANT_NONE || k == kGatherK) && config_.reference_hash) {
    ++references_checked_;
    const std::string expected = config_.reference_hash(step, k, ring);
    if (first_ok->hash != expected)
      violation(name + " in ring " + ring_text(ring) + ": result hash " + first_ok->hash +
                " differs from the reference " + expected);
  }
  ++ops_checked_;
}

void InvariantChecker::add_sync(const SyncReport& r) {
  const std::string name = "shared-state sync (epoch " + std::to_string(r.epoch) + ", step " + std::to_string(r.step) +
                           ")";
  ++syncs_checked_;
  SyncRound& round = syncs_[{r.epoch, r.ring, r.step}];
  if (r.t1 - round.last_t > config_.deadlines.hang_s) round = SyncRound{};  // an earlier sync of that name
  round.last_t = std::max(round.last_t, r.t1);
  if (r.result != FERRY_OK) {
    if (removed_from_run(r.result)) return;
    if (round.first_ok)
      violation(name + ": succeeded on " + round.first_ok->peer + " but failed on " + r.peer + " (" +
                ferry_strerror(static_cast<ferry_result>(r.result)) + ")");
    if (!round.first_failed) round.first_failed = r;
    return;
  }
  const std::string revision = " revision " + std::to_string(r.revision);
  if (config_.state_hash && r.hash != config_.state_hash(r.revision))
    violation(name + " on " + r.peer + ": its bytes at" + revision + " hash to " + r.hash + ", not the reference " +
              config_.state_hash(r.revision));
  if (auto it = synced_revision_.find(r.peer_id); it != synced_revision_.end() && r.revision < it->second)
    violation(name + " on " + r.peer + ": its revision went back from " + std::to_string(it->second) + " to " +
              std::to_string(r.revision));
  synced_revision_[r.peer_id] = r.revision;
  if (round.first_failed)
    violation(name + ": succeeded on " + r.peer + " but failed on " + round.first_failed->peer + " (" +
              ferry_strerror(static_cast<ferry_result>(round.first_failed->result)) + ")");
  if (!round.first_ok) {
    round.first_ok = r;
  } else if (r.revision != round.first_ok->revision || r.hash != round.first_ok->hash) {
    violation(name + ": " + r.peer + " ended at" + revision + " (hash " + r.hash + "), " + round.first_ok->peer +
              " at revision " + std::to_string(round.first_ok->revision) + " (hash " + round.first_ok->hash + ")");
  }
}

void InvariantChecker::settle(double t) {
  std::erase_if(syncs_, [t](const auto& entry) { return entry.second.last_t < t; });
  for (auto it = open_.begin(); it != open_.end();) {
    if (it->second.last_t < t) {
      check(it->first, it->second);
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
}

void InvariantChecker::settle_all() {
  for (const auto& [key, op] : open_) check(key, op);
  open_.clear();
}

}  // namespace ferry::chaos
