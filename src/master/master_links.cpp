// Link measurements: members report the links they used (and probed: see
// master_proposals.cpp) into their group's matrix (link_matrix.h), and may
// query it.
#include "master/master_state.h"

namespace ferry::master {

void MasterState::handle(Peer& peer, const wire::LinkReport& m) {
  if (peer.phase != Phase::accepted)
    return kick(peer.conn, Errc::protocol, "link report from a peer that is not accepted");
  for (const wire::LinkEntry& e : m.links)
    if (e.from_peer != peer.id) return kick(peer.conn, Errc::protocol, "a link report may only hold the sender's links");
  Group& group = group_of(peer);
  group.links.record(peer.id, m.links, group.ring, now_ms_);
}

void MasterState::handle(Peer& peer, const wire::LinkMatrixQuery& m) {
  if (peer.phase != Phase::accepted)
    return kick(peer.conn, Errc::protocol, "link matrix query from a peer that is not accepted");
  send(peer.id, wire::LinkMatrix{.request = m.request, .links = link_matrix(peer.group)});
}

std::vector<wire::LinkEntry> MasterState::link_matrix(uint32_t group) {
  auto it = groups_.find(group);
  if (it == groups_.end()) return {};
  it->second.links.expire(now_ms_, limits_.link_max_age_ms);
  return it->second.links.entries(now_ms_, wire::kMaxLinkMatrixEntries);
}

}  // namespace ferry::master
