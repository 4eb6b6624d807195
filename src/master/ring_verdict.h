// Who is to blame when a proposed ring's links do not all form. Pure: the
// members in ring order, what each answered, and out comes either "wait for
// more answers" or the culprits to evict, all at once.
//
// Why not believe the first report: an authenticated joiner that answered
// every proposal with "unreachable: <someone>" got three honest peers kicked
// within 4 ms. So a report is only a claim about a link, and a peer is
// evicted only on corroboration:
//
//  - A member may blame only a ring neighbour (the peer it dials or the peer
//    that dials it). A failure naming anyone else (itself included) blames
//    the reporter.
//  - A member blamed by both its neighbours is evicted, unless it is an
//    accepted member and both accusers are pending (joiners never outvote
//    an accepted member), or (with `reroute`) a blamed link is one both ends
//    open at once (punched or relayed): that failure is the pair's, and the
//    link is routed around like one down at both ends, whoever else the
//    blamed member named.
//  - Otherwise every accusation X -> Y is a dispute between the two ends of
//    one link, settled by Y's own answer:
//      Y blames X too (the link is really down): with `reroute`, nobody:
//        the link's dialer cannot reach its far end, and the master looks
//        for a ring without that ordered pair (a firewall, a route, an
//        address family one side lacks; in a ring of two, both directions);
//        without, the less trusted of the two;
//      Y says ready (its side of the link formed): the pending one of the two
//        if one is pending, else the accuser X;
//      Y failed blaming its other neighbour (Y is in trouble anyway): the
//        pending one if one is pending, else Y.
//    "Less trusted": a pending peer before an accepted one, else the newer
//    (higher id). An accusation that touches a peer already evicted is
//    explained by that eviction and settles nothing more.
//  - A pending member not linked to an accepted member through neighbours
//    that are staying and do not accuse each other is evicted too: a run of
//    fake joiners shields its middle members (they claim ready, and only
//    other fakes could contradict them), so without this each fake would
//    cost a round of its own.
//  - Silence: the verdict waits for every accepted member. A pending member
//    that has not answered is not waited for once its fate is sealed: an
//    accepted member blamed it (unless `hear_if_blamed`: its answer may show
//    the link down at both ends, to be routed around; any neighbour's blame
//    waits so, as two joiners behind one failed link answer at the same
//    silent deadline), or it is cut off from
//    every accepted member as above. It is then evicted as silent. (A
//    proposal of only pending members waits for all of them.)
//
// Termination: a failed answer always yields a culprit (a self-blame does,
// and each dispute does unless a culprit already explains it), so every
// retry drops at least one peer. Honest cases, for the record: a ring of two
// where one end cannot be dialled has both ends blame each other, and the
// newer goes; a firewalled pending peer is blamed by the neighbour that
// dials it and blames it back (its inbound lane never came): it goes; its
// other neighbour, which reached it, stays.
//
// Rerouting costs a round per failed link, so the master allows a few per
// admission and then settles disputes by eviction again: fakes that blame
// each other back gain those rounds and no more.
//
// Limits: an accepted insider wins every dispute with a joiner, so it can
// keep one joiner out per round (and put its source address in back-off);
// two colluding accepted members can evict an accepted neighbour. Joiners
// can never evict an accepted member.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "wire/messages.h"

namespace ferry::master {

struct VerdictMember {
  uint64_t id = 0;
  bool accepted = false;                      // in the committed ring before this proposal
  std::optional<wire::TopologyReady> answer;  // none yet: silent so far
  bool hear_if_blamed = false;                // pending: wait for its answer even once an accepted member blamed it
  bool next_dials = false;                    // its link to the next member is dialed by that member (link_dialers.h)
  // Its link to the next member is opened from both ends at once (punched, or through a
  // relay): a failure there is the pair's, and each end sees it (each may name only one
  // neighbour, so the other end may not name this one back).
  bool next_mutual = false;
};

struct Culprit {
  uint64_t id = 0;
  std::string why;
};

// A link both ends agree did not form: `from` dialed `to` (its sender, or its receiver).
struct FailedLink {
  uint64_t from = 0, to = 0;
  std::string why;
};

struct Verdict {
  std::vector<Culprit> culprits;
  std::vector<FailedLink> failed_links;  // only with reroute
  bool all_ready() const { return culprits.empty() && failed_links.empty(); }
};

// Members in ring order. nullopt: wait for more answers. Otherwise the
// culprits and failed links (both empty only when every member is ready).
// `reroute`: a link down at both ends is a failed link, not a dispute.
std::optional<Verdict> ring_verdict(const std::vector<VerdictMember>& ring, bool reroute);

}  // namespace ferry::master
