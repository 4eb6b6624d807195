// A master started again: groups rebuilt from their members' resume hellos
// (the rules are in master_state.h, "A master started again").
#include <algorithm>
#include <set>

#include "core/log.h"
#include "master/master_state.h"
#include "master/peer_ids.h"

namespace ferry::master {

void MasterState::on_resume(ConnId conn, const wire::Hello& hello, uint32_t heartbeat_timeout_ms) {
  const PeerId id = hello.resume_peer_id;
  const uint64_t epoch = hello.resume_epoch;
  auto refuse = [&](const std::string& why) {
    kick(conn, Errc::kicked, "cannot resume as " + peer_name(id) + ": " + why + "; join again as a newcomer");
  };
  if (peers_.count(id)) return refuse("a peer with that id is connected");
  uint64_t awaited = 0;
  for (const wire::SeqRange& r : hello.resume_awaiting) awaited += r.count;
  if (awaited > limits_.max_open_collectives_per_peer)
    return refuse("it awaits " + std::to_string(awaited) + " verdicts, more than a peer may have open");
  if (!contains(hello.resume_ring, id)) return refuse("the ring it reports does not hold it");
  // A ring naming a member twice would put it twice in every proposal.
  if (std::set<PeerId>(hello.resume_ring.begin(), hello.resume_ring.end()).size() != hello.resume_ring.size())
    return refuse("the ring it reports names a member twice");
  if (auto it = groups_.find(hello.peer_group); it != groups_.end()) {
    const Group& known = it->second;
    // A group this master formed from newcomers only has epochs below the old master's (a
    // rebuilt group commits above every epoch reported): its members stay, the old ones come back.
    if (!known.resume && known.epoch >= epoch)
      return refuse("this master runs group " + std::to_string(known.id) + " (epoch " + std::to_string(known.epoch) +
                    ") and did not restart since it lost this peer, or the group committed a new ring since");
    if (known.resume && known.resume->settled) return refuse("the group was rebuilt without it");
    if (known.resume && epoch < known.epoch && !contains(known.resume->last_ring, id))
      return refuse("the group's last ring (epoch " + std::to_string(known.epoch) + ") does not hold it");
  }

  Group& group = groups_[hello.peer_group];
  if (!group.resume) {
    group.id = hello.peer_group;
    // Built here, not emplaced: clang judges a nested struct with member initializers
    // not default-constructible inside its enclosing class, and std::optional keeps that verdict.
    Group::Resume started;
    started.started_ms = now_ms_;
    started.last_ring = hello.resume_ring;
    started.fresh = group.ring;
    group.resume = std::move(started);
    if (!group.ring.empty()) {
      log().info("resume: group {} (epoch {}, {} newcomer(s) since this master started) takes back the old ring's "
                 "members, starting with {} at epoch {}",
                 group.id, group.epoch, group.ring.size(), peer_name(id), epoch);
      group.proposal.reset();  // its members' answers are ignored; their vote waits for the rebuilt group
      abort_all_collectives(group, Errc::peer_lost, "the master restarted and the group's old members are back");
    } else {
      log().info("resume: group {} is rebuilt from its members, starting with {} at epoch {}", group.id,
                 peer_name(id), epoch);
    }
    group.epoch = epoch;
    group.broken = true;  // collectives wait for a vote, and the vote rebuilds the links
  }
  Group::Resume& r = *group.resume;
  if (epoch > group.epoch) {
    // A later ring than the members back so far knew: it is the group.
    group.epoch = epoch;
    r.last_ring = hello.resume_ring;
    r.committed.clear();
    for (PeerId member : std::vector<PeerId>(group.ring))
      if (!contains(r.last_ring, member) && !contains(r.fresh, member))
        kick(peers_.at(member).conn, Errc::kicked,
             "cannot resume as " + peer_name(member) + ": the group's last ring (epoch " + std::to_string(epoch) +
                 ") does not hold it; join again as a newcomer");
  }

  Peer& peer = add_peer(conn, hello, id, heartbeat_timeout_ms);
  ++stats_.resumes;
  journal_.event(now_ms_, "resume", hello.peer_group, id, who(id) + " resumed after a master restart");
  peer.phase = Phase::accepted;
  next_peer_id_ = std::max(next_peer_id_, id + 1);
  next_epoch_ = std::max(next_epoch_, epoch + 1);
  std::vector<PeerId> ring;  // the last ring's order, then the newcomers
  for (PeerId member : r.last_ring)
    if (member == id || (contains(group.ring, member) && !contains(r.fresh, member))) ring.push_back(member);
  for (PeerId member : group.ring)
    if (contains(r.fresh, member)) ring.push_back(member);
  group.ring = std::move(ring);
  group.relays.clear();  // a resumed ring's links are rebuilt by its next proposal
  if (hello.resume_revision) {
    // What the newcomers of this master synced among themselves is another history: a
    // higher revision from the old ring replaces it, and its holders with it.
    const uint64_t held = hello.resume_revision - 1;
    if (!group.shared_revision || held > *group.shared_revision) {
      group.shared_revision = held;
      group.revision_holders.clear();
    }
    if (held == *group.shared_revision) group.revision_holders.insert(id);
  }
  if (epoch == group.epoch) r.committed.insert(r.committed.end(), hello.resume_committed.begin(),
                                               hello.resume_committed.end());
  r.awaiting[id] = {epoch, hello.resume_awaiting};
  log().info("resume: {} is back in group {} (it knew epoch {}; {} of {} members of the last ring back)",
             peer_name(id), group.id, epoch, group.ring.size() - r.fresh.size(), r.last_ring.size());
  maybe_settle(group);
}

void MasterState::maybe_settle(Group& group) {
  if (!group.resume || group.resume->settled) return;
  Group::Resume& r = *group.resume;
  const bool all_back = group.ring.size() == r.last_ring.size() + r.fresh.size();
  if (!all_back && now_ms_ - r.started_ms < limits_.resume_settle_ms) return;
  r.settled = true;
  size_t committed = 0, aborted = 0;
  for (const auto& [id, awaited] : r.awaiting) {
    const auto& [epoch, ranges] = awaited;
    for (const wire::SeqRange& range : ranges) {
      for (uint32_t k = 0; k < range.count; ++k) {
        const uint32_t seq = range.first + k;
        const bool ok = epoch == group.epoch && wire::in_seq_ranges(r.committed, seq);
        ++(ok ? committed : aborted);
        send(id, wire::CollectiveResult{.epoch = epoch,
                                        .seq = seq,
                                        .code = ok ? 0u : static_cast<uint32_t>(Errc::peer_lost),
                                        .reason = ok ? "" : "the master restarted before this collective's verdict, "
                                                            "and no member saw it committed"});
      }
    }
  }
  r.awaiting.clear();
  log().info("resume: group {} settled at epoch {} with {} of {} members of its last ring{}; {} awaited collective "
             "verdict(s) committed, {} aborted",
             group.id, group.epoch, group.ring.size() - r.fresh.size(), r.last_ring.size(),
             all_back ? "" : " (the rest are late)",
             committed, aborted);
  maybe_complete_votes(group);
}

}  // namespace ferry::master
