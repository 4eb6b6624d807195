#include "master/ring_verdict.h"

#include <algorithm>

#include "master/peer_ids.h"

namespace ferry::master {
namespace {

// The answers of one proposal, read as claims about its links.
class Claims {
 public:
  explicit Claims(const std::vector<VerdictMember>& m) : m_(m), n_(m.size()) {}

  size_t prev(size_t i) const { return (i + n_ - 1) % n_; }
  size_t next(size_t i) const { return (i + 1) % n_; }
  bool ready(size_t i) const { return m_[i].answer && m_[i].answer->code == 0; }
  bool failed(size_t i) const { return m_[i].answer && m_[i].answer->code != 0; }

  // The neighbour i blames; nullopt when i did not fail or named someone else.
  std::optional<size_t> blamed(size_t i) const {
    if (!failed(i) || n_ < 2) return std::nullopt;
    uint64_t who = m_[i].answer->unreachable_peer;
    if (m_[prev(i)].id == who) return prev(i);
    if (m_[next(i)].id == who) return next(i);
    return std::nullopt;
  }
  bool accuses(size_t i, size_t j) const {
    auto b = blamed(i);
    return b && *b == j;
  }
  // Whether the link between neighbours i and j is opened from both ends (VerdictMember::next_mutual).
  bool mutual(size_t i, size_t j) const {
    return (j == next(i) && m_[i].next_mutual) || (i == next(j) && m_[j].next_mutual);
  }
  // A link opened from both ends that one end blames while the other failed too: down, the pair's.
  bool mutual_down(size_t i, size_t j) const {
    return mutual(i, j) && ((accuses(i, j) && failed(j)) || (accuses(j, i) && failed(i)));
  }

  // Of the two ends of a link, the one to evict when nothing else decides.
  size_t less_trusted(size_t a, size_t b) const {
    if (m_[a].accepted != m_[b].accepted) return m_[a].accepted ? b : a;
    return m_[a].id > m_[b].id ? a : b;
  }
  // The pending one of two ends, or `otherwise` when both are alike.
  size_t pending_one(size_t a, size_t b, size_t otherwise) const {
    if (m_[a].accepted == m_[b].accepted) return otherwise;
    return m_[a].accepted ? b : a;
  }

  // Members reachable from an accepted member in `alive`, stepping between
  // neighbours that are both alive and do not accuse each other (or, with
  // `failed_links_count`, accuse each other both ways: a failed link to route around).
  std::vector<bool> anchored(const std::vector<bool>& alive, bool failed_links_count = false) const {
    std::vector<bool> reached(n_, false);
    std::vector<size_t> todo;
    for (size_t i = 0; i < n_; ++i)
      if (alive[i] && m_[i].accepted) {
        reached[i] = true;
        todo.push_back(i);
      }
    while (!todo.empty()) {
      size_t i = todo.back();
      todo.pop_back();
      for (size_t j : {prev(i), next(i)}) {
        bool failed_link = (accuses(i, j) && accuses(j, i)) || mutual_down(i, j);
        if (reached[j] || !alive[j] || ((accuses(i, j) || accuses(j, i)) && !(failed_links_count && failed_link)))
          continue;
        reached[j] = true;
        todo.push_back(j);
      }
    }
    return reached;
  }

  // With answers missing: true when no missing answer could still matter.
  bool sealed() const {
    std::vector<bool> alive(n_, true);
    for (size_t i = 0; i < n_; ++i) {
      if (m_[i].answer) continue;
      if (m_[i].accepted) return false;
      for (size_t j : {prev(i), next(i)})
        if (accuses(j, i)) {
          // Blamed, its answer may still blame back: a failed link to route
          // around, not a member to lose. Any neighbour's blame counts: two
          // joiners behind one failed link answer at the same deadline.
          if (m_[i].hear_if_blamed) return false;
          if (m_[j].accepted) alive[i] = false;
        }
    }
    auto reached = anchored(alive);
    for (size_t i = 0; i < n_; ++i)
      if (!m_[i].answer && alive[i] && reached[i]) return false;
    return true;
  }

  std::string reason(size_t i) const { return m_[i].answer ? m_[i].answer->reason : std::string(); }

 private:
  const std::vector<VerdictMember>& m_;
  size_t n_;
};

}  // namespace

std::optional<Verdict> ring_verdict(const std::vector<VerdictMember>& members, bool reroute) {
  const size_t n = members.size();
  Claims claims(members);
  bool any_accepted = std::any_of(members.begin(), members.end(), [](const auto& m) { return m.accepted; });
  bool all_answered = std::all_of(members.begin(), members.end(), [](const auto& m) { return m.answer.has_value(); });
  if (!all_answered && (!any_accepted || !claims.sealed())) return std::nullopt;

  std::vector<std::string> why(n);  // non-empty: evicted
  auto out = [&](size_t i) { return !why[i].empty(); };
  auto evict = [&](size_t i, std::string reason) {
    if (!out(i)) why[i] = std::move(reason);
  };
  auto name = [&](size_t i) { return peer_name(members[i].id); };
  Verdict verdict;

  for (size_t i = 0; i < n; ++i) {
    if (!members[i].answer)
      evict(i, "did not report on its links, and its neighbours could not link with it");
    else if (claims.failed(i) && !claims.blamed(i))
      evict(i, "its failure named " + peer_name(members[i].answer->unreachable_peer) +
                   ", not a ring neighbour: " + claims.reason(i));
  }
  for (size_t i = 0; n >= 3 && i < n; ++i) {
    size_t p = claims.prev(i), q = claims.next(i);
    if (out(i) || !claims.accuses(p, i) || !claims.accuses(q, i)) continue;
    if (members[i].accepted && !members[p].accepted && !members[q].accepted) continue;
    if (reroute && (claims.mutual_down(p, i) || claims.mutual_down(i, q))) continue;  // the pair's failure
    evict(i, "both ring neighbours could not link with it (" + name(p) + ": " + claims.reason(p) + ")");
  }
  for (size_t i = 0; i < n; ++i) {
    auto j = claims.blamed(i);
    if (!j || out(i) || out(*j)) continue;
    if (reroute && claims.mutual_down(i, *j) && !claims.accuses(*j, i)) {
      // Down at both ends, though *j named its other neighbour: the sender first, as sent.
      size_t sender = *j == claims.next(i) ? i : *j, receiver = sender == i ? *j : i;
      verdict.failed_links.push_back({members[sender].id, members[receiver].id, claims.reason(i)});
    } else if (claims.accuses(*j, i) && reroute) {
      // Each failed link once, as i's link to its next member, named by who
      // dialed it. In a ring of two both links join the same two members and
      // neither end knows which failed: both are.
      if (*j == claims.next(i)) {
        size_t dialer = members[i].next_dials ? *j : i, far = dialer == i ? *j : i;
        verdict.failed_links.push_back({members[dialer].id, members[far].id, claims.reason(dialer)});
      }
    } else if (claims.accuses(*j, i)) {
      size_t loser = claims.less_trusted(i, *j);
      evict(loser, "the link between " + name(i) + " and " + name(*j) + " failed at both ends (" + claims.reason(i) +
                       ")");
    } else if (claims.ready(*j)) {
      size_t loser = claims.pending_one(i, *j, i);
      evict(loser, name(i) + " blamed " + name(*j) + ", whose side of their link formed (" + claims.reason(i) + ")");
    } else {
      size_t loser = claims.pending_one(i, *j, *j);
      evict(loser, name(i) + " could not link with " + name(*j) + ", which failed too (" + claims.reason(i) + ")");
    }
  }
  if (any_accepted) {
    std::vector<bool> alive(n);
    for (size_t i = 0; i < n; ++i) alive[i] = !out(i);
    auto reached = claims.anchored(alive, reroute);
    for (size_t i = 0; i < n; ++i)
      if (alive[i] && !members[i].accepted && !reached[i])
        evict(i, "no accepted member vouches for its links (its neighbours are evicted or blamed it)");
  }

  for (size_t i = 0; i < n; ++i)
    if (out(i)) verdict.culprits.push_back({members[i].id, why[i]});
  return verdict;
}

}  // namespace ferry::master
