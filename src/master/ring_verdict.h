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
//    an accepted member).
//  - Otherwise every accusation X -> Y is a dispute between the two ends of
//    one link, settled by Y's own answer:
//      Y blames X too (the link is really down): the less trusted of the two;
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
//    accepted member blamed it, or it is cut off from every accepted member
//    as above. It is then evicted as silent. (A proposal of only pending
//    members waits for all of them.)
//
// Termination: a failed answer always yields a culprit (a self-blame does,
// and each dispute does unless a culprit already explains it), so every
// retry drops at least one peer. Honest cases, for the record: a ring of two
// where one end cannot be dialled has both ends blame each other, and the
// newer goes; a firewalled pending peer is blamed by the neighbour that
// dials it and blames it back (its inbound lane never came): it goes; its
// other neighbour, which reached it, stays.
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
};

struct Culprit {
  uint64_t id = 0;
  std::string why;
};

// Members in ring order. nullopt: wait for more answers. Otherwise the
// culprits (empty only when every member is ready).
std::optional<std::vector<Culprit>> ring_verdict(const std::vector<VerdictMember>& ring);

}  // namespace ferry::master
