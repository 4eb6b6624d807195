// Every control message of the protocol, master <-> peer and peer <-> peer
// (link set-up). Each struct lists its fields once in fields(); that one list
// is both the encoder and the bounds-checked decoder (see byte_codec.h).
//
// Protocol rules the master enforces (see master/master_state.h):
//  - hello is the first frame on a master connection; welcome answers it.
//  - topology_vote, pending_query and collective_* come only from accepted
//    peers; anything else is a violation and gets the sender kicked.
//  - Collectives are numbered per epoch (seq = 0, 1, ...) in issue order; the
//    master matches the seq-th collective of every member and checks that
//    they agree.
//
// Every field has a default (`{}` for strings and lists), so that a message
// built with designated initialisers names only the fields it sets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error.h"
#include "wire/byte_codec.h"

namespace ferry::wire {

enum class MessageType : uint16_t {
  // peer -> master
  hello = 1,
  topology_vote = 2,
  topology_ready = 3,
  pending_query = 4,
  collective_begin = 5,
  collective_end = 6,
  leave = 7,
  sync_begin = 8,
  link_report = 9,
  link_matrix_query = 10,
  probe_done = 11,
  peer_label = 12,
  // master -> peer
  welcome = 64,
  topology = 65,
  topology_done = 66,
  pending_count = 67,
  collective_go = 68,
  collective_result = 69,
  kick = 70,
  sync_plan = 71,
  auth_challenge = 72,
  link_matrix = 73,
  probe_round = 74,
  collective_pending = 75,
  call_refused = 76,
  going_away = 77,
  gather_go = 78,
  // both directions on a master connection: liveness
  heartbeat = 96,
  // peer -> peer, before a link switches to raw chunk streaming
  link_hello = 128,
  link_welcome = 129,
  fetch_hello = 130,
  link_challenge = 131,
  probe_hello = 132,
  relay_hello = 133,
};

inline constexpr size_t kMaxHostLength = 255;
inline constexpr size_t kMaxOtherHosts = 8;  // a peer's other listening addresses
inline constexpr size_t kMaxReasonLength = 1024;
inline constexpr size_t kMaxRingMembers = 65536;
// A resume record rides in the hello, which must fit kMaxHandshakePayload (4 KiB) with the
// rest: a ring of at most this many members, and this many ranges of collective numbers each.
inline constexpr size_t kMaxResumeRing = 256;
inline constexpr size_t kMaxResumeRanges = 48;

// `text` cut to what a reason field may carry (kMaxReasonLength bytes, never
// in the middle of a UTF-8 character, "..." marking the cut). Reasons often
// quote another side's reason: without the cut, a receiver would refuse the
// whole message as malformed.
std::string bounded_reason(std::string text);
inline constexpr uint32_t kMaxConnectionsPerLink = 64;
inline constexpr size_t kMaxSharedTensors = 8192;
inline constexpr size_t kMaxTensorName = 255;
inline constexpr size_t kMaxAuthField = 64;  // nonces and HMAC proofs
inline constexpr size_t kMaxHostKey = 256;    // link_hello's host key and ring name
// A link matrix is N(N-1) entries of 53 bytes: a 256-peer group's fits in a
// control frame (wire::kMaxControlPayload); larger groups get their first entries.
inline constexpr size_t kMaxLinkMatrixEntries = 256 * 255;
// A peer's status label (peer_label): one short line for a table cell.
inline constexpr size_t kMaxPeerLabel = 128;

// Authentication (core/run_secret.h): whoever accepts a connection speaks
// first with a nonce; the dialer answers with its own nonce and a proof over
// both; the acceptor proves back in its welcome. Without a run secret the
// nonces still flow and the proofs stay empty.

// barrier and broadcast run as all-reduces (a broadcast sums the root's bytes
// with the others' zeros, as integers: exact); their kind names them in messages.
// all_gather: each member's begin carries its own contribution's bytes in
// `count` (they may differ); its start signal is a gather_go with every size.
enum class CollectiveKind : uint8_t { allreduce = 1, shared_state = 2, barrier = 3, broadcast = 4, all_gather = 5 };
enum class SyncStrategy : uint8_t { enforce_popular = 0, receive_only = 1, send_only = 2 };

// The master's first frame on every connection.
struct AuthChallenge {
  static constexpr MessageType kType = MessageType::auth_challenge;
  std::string nonce{};
  uint8_t required = 0;  // the master holds a run secret and checks proofs
  template <class V> void fields(V& v) { v(nonce, Limit{kMaxAuthField}); v(required); }
};

// Collective numbers first .. first + count - 1 (a resume record's lists).
struct SeqRange {
  uint32_t first = 0;
  uint32_t count = 0;
  template <class V> void fields(V& v) { v(first); v(count); }
  bool operator==(const SeqRange&) const = default;
};
// Sorted, distinct numbers as ranges, ascending.
std::vector<SeqRange> seq_ranges(const std::vector<uint32_t>& sorted);
bool in_seq_ranges(const std::vector<SeqRange>& ranges, uint32_t seq);

struct Hello {
  static constexpr MessageType kType = MessageType::hello;
  uint32_t peer_group = 0;
  std::string advertised_host{};  // empty: use the address the master sees
  uint16_t advertised_port = 0;
  uint32_t p2p_connections = 0;
  uint32_t heartbeat_timeout_ms = 0;
  std::string nonce{};
  std::string proof{};  // over (challenge nonce, this nonce); empty without a secret
  // How long after a proposal this peer answers at the latest when its
  // previous peer never connects (peer/link_setup.h); 0: not said.
  uint32_t silent_link_ms = 0;
  // The listener's other addresses (IP literals; empty when advertised_host is set or the
  // listener is bound to one address): the master offers those of the family it did not see
  // this peer in, so a neighbour with only that family can still dial it.
  std::vector<std::string> other_hosts{};
  // A member that lost its master and dials it again (master_reconnect_timeout_ms)
  // says what it knew, so a master started afresh can rebuild the group
  // (master_state.h, "A master started again"). resume_peer_id 0: a newcomer.
  uint64_t resume_peer_id = 0;
  uint64_t resume_epoch = 0;
  std::vector<uint64_t> resume_ring{};       // member ids in ring order at resume_epoch
  uint64_t resume_revision = 0;            // the last committed shared-state revision + 1; 0: none
  std::vector<SeqRange> resume_committed{};  // the last collectives of resume_epoch it saw committed
  std::vector<SeqRange> resume_awaiting{};   // collectives of resume_epoch it ended ok and awaits a verdict on
  // This peer accepts no connection (ferry_comm_params.dial_out_only): it has no p2p
  // listener, so every link, probe and fetch with it is dialed from its side.
  uint8_t dial_out_only = 0;
  template <class V> void fields(V& v) {
    v(peer_group); v(advertised_host, Limit{kMaxHostLength}); v(advertised_port);
    v(p2p_connections); v(heartbeat_timeout_ms); v(nonce, Limit{kMaxAuthField}); v(proof, Limit{kMaxAuthField});
    v(silent_link_ms); v(other_hosts, Limit{kMaxOtherHosts, kMaxHostLength});
    v(resume_peer_id); v(resume_epoch); v(resume_ring, Limit{kMaxResumeRing});
    v(resume_revision); v(resume_committed, Limit{kMaxResumeRanges}); v(resume_awaiting, Limit{kMaxResumeRanges});
    v(dial_out_only); v(relay_port);
  }
  // Where this peer relays ring lanes for others (peer/relay_service.h); 0: it relays none.
  uint16_t relay_port = 0;
};

struct Welcome {
  static constexpr MessageType kType = MessageType::welcome;
  uint64_t peer_id = 0;
  std::string observed_host{};  // where the master saw this peer connect from
  std::string proof{};          // the master's, over (hello nonce, challenge nonce)
  template <class V> void fields(V& v) {
    v(peer_id); v(observed_host, Limit{kMaxHostLength}); v(proof, Limit{kMaxAuthField});
  }
};

struct TopologyVote {
  static constexpr MessageType kType = MessageType::topology_vote;
  uint8_t links_broken = 0;  // this peer's ring links failed: the ring must be rebuilt, not kept
  // ferry_optimize_topology: measure every pair afresh and take the best ring order
  uint8_t optimize = 0;
  // ferry_wait_for_world: the master holds the vote until the group's members and
  // waiting newcomers number min_world, or hold_ms passed (0, 0: decide at once)
  uint32_t min_world = 0;
  uint32_t hold_ms = 0;
  template <class V> void fields(V& v) { v(links_broken); v(optimize); v(min_world); v(hold_ms); }
};

// Where a peer takes p2p connections: ring links, probes, shared-state fetches.
struct PeerAddress {
  uint64_t peer_id = 0;
  std::string host{};
  uint16_t port = 0;
  // Dialled in turn when `host` cannot be (another address family: peer/dial_candidates.h).
  std::vector<std::string> other_hosts{};
  uint16_t relay_port = 0;  // where it relays ring lanes (Hello::relay_port); 0: none
  template <class V> void fields(V& v) {
    v(peer_id); v(host, Limit{kMaxHostLength}); v(port); v(other_hosts, Limit{kMaxOtherHosts, kMaxHostLength});
    v(relay_port);
  }
  bool operator==(const PeerAddress&) const = default;
};
using RingMember = PeerAddress;

// Who opens a ring link's connections (Topology::receiver_dials, LinkHello::receiver_dials).
enum class LinkDial : uint8_t {
  sender = 0,    // the data's sender dials its receiver
  receiver = 1,  // the receiver dials (the sender accepts no connection from it)
  both = 2,      // neither can: both connect at once from agreed ports (net/punch.h)
  relay = 3,     // nor punch: both dial a relay (Topology::relays) that joins their lanes
};

// A proposed ring; members connect to their neighbours and answer with topology_ready.
struct Topology {
  static constexpr MessageType kType = MessageType::topology;
  uint64_t epoch = 0;
  uint32_t peer_group = 0;
  uint32_t p2p_connections = 0;  // lanes per link, agreed for the whole ring
  std::vector<RingMember> ring{};
  // Who dials each link (master/link_dialers.h), a LinkDial per link: receiver_dials[i]
  // is LinkDial::receiver, the link from ring[i] to ring[i + 1] is dialed by its receiver,
  // ring[i + 1]; LinkDial::both, both ends connect at once from agreed ports (a TCP
  // simultaneous open, net/punch.h); else, or when the list is shorter, by its sender.
  // The data always flows from ring[i] to ring[i + 1].
  std::vector<uint8_t> receiver_dials{};
  // For each link whose LinkDial is relay, the member both ends dial (its PeerAddress::relay_port);
  // 0 or missing elsewhere.
  std::vector<uint64_t> relays{};
  LinkDial link_dial(size_t i) const {
    return i < receiver_dials.size() ? static_cast<LinkDial>(receiver_dials[i]) : LinkDial::sender;
  }
  bool receiver_dials_link(size_t i) const { return link_dial(i) == LinkDial::receiver; }
  uint64_t relay_of(size_t i) const { return i < relays.size() ? relays[i] : 0; }
  template <class V> void fields(V& v) {
    v(epoch); v(peer_group); v(p2p_connections); v(ring, Limit{kMaxRingMembers});
    v(receiver_dials, Limit{kMaxRingMembers}); v(relays, Limit{kMaxRingMembers});
  }
};

struct TopologyReady {
  static constexpr MessageType kType = MessageType::topology_ready;
  uint64_t epoch = 0;
  uint32_t code = 0;              // Errc; 0 when every link is up
  uint64_t unreachable_peer = 0;  // who could not be reached, when known
  std::string reason{};
  template <class V> void fields(V& v) {
    v(epoch); v(code); v(unreachable_peer); v(reason, Limit{kMaxReasonLength});
  }
};

// The ring of `epoch` is complete: every member has its links. A vote that
// changed nothing also ends with a new epoch (same ring, same links): every
// completed vote restarts the collective numbering, which realigns peers that
// issued different numbers of collectives before a failure.
struct TopologyDone {
  static constexpr MessageType kType = MessageType::topology_done;
  uint64_t epoch = 0;
  uint32_t global_world = 0;
  uint32_t num_groups = 0;
  uint32_t largest_group = 0;
  template <class V> void fields(V& v) { v(epoch); v(global_world); v(num_groups); v(largest_group); }
};

struct PendingQuery {
  static constexpr MessageType kType = MessageType::pending_query;
  template <class V> void fields(V&) {}
};

struct PendingCount {
  static constexpr MessageType kType = MessageType::pending_count;
  uint32_t pending = 0;
  template <class V> void fields(V& v) { v(pending); }
};

struct CollectiveBegin {
  static constexpr MessageType kType = MessageType::collective_begin;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  uint8_t kind = 0;  // CollectiveKind
  uint64_t tag = 0;
  uint64_t count = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t quant = 0;         // core/quant.h Quant
  uint32_t quant_block = 0;
  uint32_t root = 0;         // broadcast: the rank whose bytes every member receives
  template <class V> void fields(V& v) {
    v(epoch); v(seq); v(kind); v(tag); v(count); v(dtype); v(op); v(quant); v(quant_block); v(root);
  }
  // Everything every member must agree on (an all-gather's sizes are its members' own).
  bool same_collective(const CollectiveBegin& o) const {
    const bool sizes_differ_freely = kind == static_cast<uint8_t>(CollectiveKind::all_gather);
    return kind == o.kind && tag == o.tag && (sizes_differ_freely || count == o.count) && dtype == o.dtype &&
           op == o.op && quant == o.quant && quant_block == o.quant_block && root == o.root;
  }
};

struct CollectiveGo {
  static constexpr MessageType kType = MessageType::collective_go;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  template <class V> void fields(V& v) { v(epoch); v(seq); }
};

// An all-gather's go: every member's contribution size in bytes, in ring
// order (rank 0 first), from the members' begins.
struct GatherGo {
  static constexpr MessageType kType = MessageType::gather_go;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  std::vector<uint64_t> sizes{};
  template <class V> void fields(V& v) { v(epoch); v(seq); v(sizes, Limit{kMaxRingMembers}); }
};

// A member finished its part (code 0) or failed (code = Errc).
struct CollectiveEnd {
  static constexpr MessageType kType = MessageType::collective_end;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  uint32_t code = 0;
  std::string reason{};
  template <class V> void fields(V& v) { v(epoch); v(seq); v(code); v(reason, Limit{kMaxReasonLength}); }
};

// The master's verdict, the same for every member: committed (0) or aborted.
struct CollectiveResult {
  static constexpr MessageType kType = MessageType::collective_result;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  uint32_t code = 0;
  std::string reason{};
  // Newcomers of the group waiting for admission when it was decided: the members
  // tell their callers (once per epoch) that only a vote admits them.
  uint32_t pending = 0;
  template <class V> void fields(V& v) {
    v(epoch); v(seq); v(code); v(reason, Limit{kMaxReasonLength}); v(pending);
  }
};

// The answer to a member that ended a collective and, its verdict long in
// coming, asked the master to abort it: the others are still connected and
// running (each fails its own op when its transfer stalls), so the wait is a
// slower link's, not a lost peer's; the member waits another period.
struct CollectivePending {
  static constexpr MessageType kType = MessageType::collective_pending;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  std::vector<uint64_t> waiting_for{};  // members that have not ended yet
  template <class V> void fields(V& v) { v(epoch); v(seq); v(waiting_for, Limit{kMaxRingMembers}); }
};

// The answer to a vote or pending query the master will not count: the
// member called it where the others began a collective (they must make the
// same calls in the same order). Its call fails with `code` (Errc::mismatch).
struct CallRefused {
  static constexpr MessageType kType = MessageType::call_refused;
  uint32_t code = 0;
  std::string reason{};
  template <class V> void fields(V& v) { v(code); v(reason, Limit{kMaxReasonLength}); }
};

struct Kick {
  static constexpr MessageType kType = MessageType::kick;
  uint32_t code = 0;
  std::string reason{};
  template <class V> void fields(V& v) { v(code); v(reason, Limit{kMaxReasonLength}); }
};

// The master's last frame when it is stopped on purpose (Ctrl-C on ferry-master,
// ferry_master_stop, ferry_master_destroy): it will not come back, so its peers
// fail at once with master_lost instead of dialing it for their reconnect
// window. A master that crashes sends nothing: its peers keep the window.
struct GoingAway {
  static constexpr MessageType kType = MessageType::going_away;
  std::string reason{};
  template <class V> void fields(V& v) { v(reason, Limit{kMaxReasonLength}); }
};

struct Heartbeat {
  static constexpr MessageType kType = MessageType::heartbeat;
  template <class V> void fields(V&) {}
};

struct Leave {
  static constexpr MessageType kType = MessageType::leave;
  template <class V> void fields(V&) {}
};

// The acceptor's first frame on every p2p connection.
struct LinkChallenge {
  static constexpr MessageType kType = MessageType::link_challenge;
  std::string nonce{};
  uint8_t required = 0;
  template <class V> void fields(V& v) { v(nonce, Limit{kMaxAuthField}); v(required); }
};

// The dialer's answer on a ring link: who dials whom, for which ring and lane.
struct LinkHello {
  static constexpr MessageType kType = MessageType::link_hello;
  uint64_t from_peer = 0;
  uint64_t to_peer = 0;
  uint64_t epoch = 0;
  uint32_t lane = 0;
  uint32_t lanes = 0;
  std::string nonce{};
  std::string proof{};
  // The dialer's net::same_host_key() and the shared-memory ring it made for
  // this lane (empty: TCP only). An acceptor with the same key maps the ring.
  std::string host_key{};
  std::string shm_ring{};
  // The data flows from from_peer to to_peer either way; a LinkDial
  // (Topology::receiver_dials): receiver, the dialer is to_peer; sender or both
  // (a punched lane, where from_peer speaks first), from_peer.
  uint8_t receiver_dials = 0;
  template <class V> void fields(V& v) {
    v(from_peer); v(to_peer); v(epoch); v(lane); v(lanes); v(nonce, Limit{kMaxAuthField}); v(proof, Limit{kMaxAuthField});
    v(host_key, Limit{kMaxHostKey}); v(shm_ring, Limit{kMaxHostKey}); v(receiver_dials);
  }
  bool receiver_dialed() const { return receiver_dials == static_cast<uint8_t>(LinkDial::receiver); }
  bool punched() const { return receiver_dials == static_cast<uint8_t>(LinkDial::both); }
  bool relayed() const { return receiver_dials == static_cast<uint8_t>(LinkDial::relay); }
  uint64_t dialer() const { return receiver_dialed() ? to_peer : from_peer; }
  uint64_t acceptor() const { return receiver_dialed() ? from_peer : to_peer; }
  // What the proof covers besides the nonces.
  std::string context() const {
    return "link:" + std::to_string(from_peer) + ">" + std::to_string(to_peer) + "@" + std::to_string(epoch) + "#" +
           std::to_string(lane) + "/" + std::to_string(lanes) + ";" + host_key + ";" + shm_ring +
           (receiver_dialed() ? ";<" : punched() ? ";<>" : relayed() ? ";<r>" : "");
  }
};

struct LinkWelcome {
  static constexpr MessageType kType = MessageType::link_welcome;
  uint32_t code = 0;
  std::string reason{};
  std::string proof{};  // the acceptor's, over (hello nonce, challenge nonce)
  uint8_t shm = 0;    // 1: the acceptor mapped the hello's ring; this lane's bytes go through it
  template <class V> void fields(V& v) {
    v(code); v(reason, Limit{kMaxReasonLength}); v(proof, Limit{kMaxAuthField}); v(shm);
  }
};

// --- shared state ---------------------------------------------------------

struct TensorDigest {
  std::string name{};
  uint8_t dtype = 0;
  uint64_t count = 0;
  uint64_t hash = 0;  // core/content_hash.h
  uint8_t allow_inequality = 0;
  template <class V> void fields(V& v) {
    v(name, Limit{kMaxTensorName}); v(dtype); v(count); v(hash); v(allow_inequality);
  }
};

// A shared-state sync is a collective too (same numbering as all-reduces).
struct SyncBegin {
  static constexpr MessageType kType = MessageType::sync_begin;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  uint64_t revision = 0;
  uint8_t strategy = 0;  // SyncStrategy
  std::vector<TensorDigest> tensors{};
  uint32_t connections = 0;  // fetch connections this peer opens per holder, when it fetches (0: one)
  template <class V> void fields(V& v) {
    v(epoch); v(seq); v(revision); v(strategy); v(tensors, Limit{kMaxSharedTensors}); v(connections);
  }
};

// Tensors are named by their position in name order (the same on every peer).
struct SyncFetch {
  uint32_t tensor = 0;
  uint64_t hash = 0;              // what the fetched bytes must hash to
  std::vector<uint64_t> holders{};  // peers that hold them
  template <class V> void fields(V& v) { v(tensor); v(hash); v(holders, Limit{kMaxRingMembers}); }
};

// Who opens a fetch connection between a fetcher and a holder (SyncPlan,
// FetchHello): whichever end the other can reach; both at once, from agreed
// ports (net/punch.h), when neither can.
enum class FetchDial : uint8_t {
  fetcher = 0,  // the fetcher dials the holder's listener
  holder = 1,   // the holder dials the fetcher's (the holder accepts no connection)
  both = 2,     // a simultaneous open; the holder says the hello
};

// A fetcher this holder opens connections to (FetchDial::holder or both).
struct ServeDial {
  PeerAddress fetcher{};
  uint8_t dial = 0;          // FetchDial
  uint32_t connections = 0;  // as many as the fetcher waits for (fetch_connections_per_holder)
  template <class V> void fields(V& v) { fetcher.fields(v); v(dial); v(connections); }
};

// The master's election result for one peer: what to fetch from whom, whom to serve.
struct SyncPlan {
  static constexpr MessageType kType = MessageType::sync_plan;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  uint64_t revision = 0;              // the revision every peer ends with
  std::vector<SyncFetch> fetches{};
  std::vector<uint64_t> serve_to{};     // peers allowed to fetch from this one
  std::vector<PeerAddress> addresses{}; // of the holders this peer fetches from
  std::vector<uint8_t> holder_dials{};   // a FetchDial per address; missing ones: FetchDial::fetcher
  std::vector<ServeDial> serve_dials{};  // fetchers this holder connects to itself
  template <class V> void fields(V& v) {
    v(epoch); v(seq); v(revision); v(fetches, Limit{kMaxSharedTensors}); v(serve_to, Limit{kMaxRingMembers});
    v(addresses, Limit{kMaxRingMembers}); v(holder_dials, Limit{kMaxRingMembers}); v(serve_dials, Limit{kMaxRingMembers});
  }
  FetchDial holder_dial(size_t i) const {
    return i < holder_dials.size() ? static_cast<FetchDial>(holder_dials[i]) : FetchDial::fetcher;
  }
};

// First frame on a p2p connection that fetches shared state; answered by
// link_welcome. from_peer fetches from to_peer, whoever opened the connection
// (`dial`, a FetchDial: fetcher, from_peer dialed and says this; holder or
// both, to_peer opened it and says this, and from_peer answers).
struct FetchHello {
  static constexpr MessageType kType = MessageType::fetch_hello;
  uint64_t from_peer = 0;
  uint64_t to_peer = 0;
  uint64_t epoch = 0;
  uint32_t seq = 0;
  std::string nonce{};
  std::string proof{};
  uint8_t dial = 0;
  template <class V> void fields(V& v) {
    v(from_peer); v(to_peer); v(epoch); v(seq); v(nonce, Limit{kMaxAuthField}); v(proof, Limit{kMaxAuthField}); v(dial);
  }
  bool holder_opened() const { return dial != static_cast<uint8_t>(FetchDial::fetcher); }
  uint64_t acceptor() const { return holder_opened() ? from_peer : to_peer; }
  std::string context() const {
    return "fetch:" + std::to_string(from_peer) + ">" + std::to_string(to_peer) + "@" + std::to_string(epoch) + "#" +
           std::to_string(seq) + ";" + std::to_string(dial);
  }
};

// --- link measurements (peer/link_stats.h, master/link_matrix.h) ----------

// What one peer measured of its link to another, as the master's matrix holds it.
struct LinkEntry {
  uint64_t from_peer = 0;
  uint64_t to_peer = 0;
  uint8_t shared_memory = 0;       // 1: the bytes go through shared memory (no TCP figures)
  uint64_t goodput_bps = 0;        // bytes/s the collectives sent over it, over their transfer time
  uint64_t delivery_rate_bps = 0;  // TCP_INFO: sum of the connections' latest delivery rates, bytes/s
  uint32_t rtt_us = 0;             // TCP_INFO: mean smoothed RTT of the connections
  uint32_t retrans_ppm = 0;        // TCP_INFO: retransmitted segments per million sent (a loss estimate)
  uint64_t bytes = 0;              // payload bytes the collectives sent over it
  uint32_t age_ms = 0;             // how old the measurement is (in a report: when it was sampled)
  uint32_t connections = 0;        // lanes carrying chunks when it was sampled
  template <class V> void fields(V& v) {
    v(from_peer); v(to_peer); v(shared_memory); v(goodput_bps); v(delivery_rate_bps); v(rtt_us); v(retrans_ppm);
    v(bytes); v(age_ms); v(connections);
  }
  bool operator==(const LinkEntry&) const = default;
};

// A peer's measurements of its own links (from_peer is the sender). Rate-limited by the peer.
struct LinkReport {
  static constexpr MessageType kType = MessageType::link_report;
  std::vector<LinkEntry> links{};
  template <class V> void fields(V& v) { v(links, Limit{kMaxRingMembers}); }
};

// Asks for the group's link matrix; answered by link_matrix with the same request.
struct LinkMatrixQuery {
  static constexpr MessageType kType = MessageType::link_matrix_query;
  uint64_t request = 0;
  template <class V> void fields(V& v) { v(request); }
};

// Every current entry of the group's matrix, as the master holds it.
struct LinkMatrix {
  static constexpr MessageType kType = MessageType::link_matrix;
  uint64_t request = 0;
  std::vector<LinkEntry> links{};
  template <class V> void fields(V& v) { v(request); v(links, Limit{kMaxLinkMatrixEntries}); }
};

// --- active probes (master/probe_plan.h, peer/link_probe.h) ---------------

// Master -> peer, while a proposal's links are all up and before it commits
// (so no collective runs): probe round `round` of the proposal's epoch. The
// peer measures its links to `targets` and accepts probe_hellos from
// `sources`, then answers probe_done. A round sends each peer at most one
// target and one source, so no two probes share its uplink or downlink.
struct ProbeRound {
  static constexpr MessageType kType = MessageType::probe_round;
  uint64_t epoch = 0;
  uint32_t round = 0;
  std::vector<RingMember> targets{};
  std::vector<uint64_t> sources{};
  // Per target, 1 where it accepts no connection: it dials this prober, which measures as ever.
  std::vector<uint8_t> target_dials{};
  // Sources this peer dials for their probe of it (it accepts no connection from them).
  std::vector<RingMember> dial_sources{};
  template <class V> void fields(V& v) {
    v(epoch); v(round); v(targets, Limit{kMaxRingMembers}); v(sources, Limit{kMaxRingMembers});
    v(target_dials, Limit{kMaxRingMembers}); v(dial_sources, Limit{kMaxRingMembers});
  }
  bool target_dials_prober(size_t i) const { return i < target_dials.size() && target_dials[i] != 0; }
};

// Peer -> master: what the round measured (from_peer is the sender), and the
// targets it could not open a connection to.
struct ProbeDone {
  static constexpr MessageType kType = MessageType::probe_done;
  uint64_t epoch = 0;
  uint32_t round = 0;
  std::vector<LinkEntry> links{};
  std::vector<uint64_t> unreachable{};
  template <class V> void fields(V& v) {
    v(epoch); v(round); v(links, Limit{kMaxRingMembers}); v(unreachable, Limit{kMaxRingMembers});
  }
};

// The dialer's answer on a probe connection (after link_challenge): bulk
// bytes follow, which the acceptor drops. host_key as in link_hello: an
// acceptor on the same host welcomes with shm = 1 and the probe ends there
// (such a pair's ring link goes through shared memory, not TCP).
struct ProbeHello {
  static constexpr MessageType kType = MessageType::probe_hello;
  uint64_t from_peer = 0;
  uint64_t to_peer = 0;
  uint64_t epoch = 0;
  uint32_t round = 0;
  std::string nonce{};
  std::string proof{};
  std::string host_key{};
  uint8_t target_dialed = 0;  // 1: to_peer (the probe's target) dialed from_peer (its prober), and says this
  template <class V> void fields(V& v) {
    v(from_peer); v(to_peer); v(epoch); v(round); v(nonce, Limit{kMaxAuthField}); v(proof, Limit{kMaxAuthField});
    v(host_key, Limit{kMaxHostKey}); v(target_dialed);
  }
  std::string context() const {
    return "probe:" + std::to_string(from_peer) + ">" + std::to_string(to_peer) + "@" + std::to_string(epoch) + "#" +
           std::to_string(round) + ";" + host_key + (target_dialed ? ";<" : "");
  }
};

// First frame on a connection a ring neighbour opens to a relay's relay_port, answered
// by link_welcome once the other end of the same lane has come too (or with a refusal).
// Plain TCP: after the welcome the relay forwards bytes both ways unread, and the two
// neighbours run the run's transport (TLS) and the link hello end to end through it.
struct RelayHello {
  static constexpr MessageType kType = MessageType::relay_hello;
  uint64_t from_peer = 0;  // who dials: `sender` or `receiver`
  uint64_t sender = 0;     // the link's data flows sender -> receiver
  uint64_t receiver = 0;
  uint64_t epoch = 0;
  uint32_t lane = 0;
  uint32_t lanes = 0;
  std::string nonce{};
  std::string proof{};
  template <class V> void fields(V& v) {
    v(from_peer); v(sender); v(receiver); v(epoch); v(lane); v(lanes); v(nonce, Limit{kMaxAuthField});
    v(proof, Limit{kMaxAuthField});
  }
  std::string context() const {
    return "relay:" + std::to_string(sender) + ">" + std::to_string(receiver) + "@" + std::to_string(epoch) + "#" +
           std::to_string(lane) + "/" + std::to_string(lanes) + ";" + std::to_string(from_peer);
  }
};

// Peer -> master, fire and forget: a short line the master shows beside this peer on
// /status and the dashboard (ferry_comm_set_label; DiLoCo's work per outer step, say).
// Display only: nothing the master decides reads it, nothing answers it, so it is never
// on the coordination path. Sent once the peer is welcomed, whenever it changes, and again
// after every welcome (a master started again learns it too). Empty: no label. Printable
// ASCII only (label_problem): a master kicks a peer that sends anything else.
struct PeerLabel {
  static constexpr MessageType kType = MessageType::peer_label;
  std::string label{};
  template <class V> void fields(V& v) { v(label, Limit{kMaxPeerLabel}); }
};

// Why `label` may not be a peer label (longer than kMaxPeerLabel bytes, or a byte outside
// printable ASCII 0x20..0x7E: it lands in JSON and HTML cells, one line each); empty if it may.
std::string label_problem(std::string_view label);

using Message = std::variant<Hello, Welcome, TopologyVote, Topology, TopologyReady, TopologyDone,
                             PendingQuery, PendingCount, CollectiveBegin, CollectiveGo, CollectiveEnd,
                             CollectiveResult, Kick, Heartbeat, Leave, LinkHello, LinkWelcome, SyncBegin, SyncPlan,
                             FetchHello, AuthChallenge, LinkChallenge, LinkReport, LinkMatrixQuery, LinkMatrix,
                             ProbeRound, ProbeDone, ProbeHello, CollectivePending, CallRefused, GoingAway,
                             PeerLabel, GatherGo, RelayHello>;

MessageType message_type(const Message& message);
const char* message_type_name(uint16_t type);

// A whole frame: header + payload.
std::vector<uint8_t> encode_message(const Message& message);

// Decodes a payload whose header was already checked. Unknown types, short
// or over-long payloads and over-limit fields are errors (Errc::protocol).
struct DecodedMessage {
  std::optional<Message> message;
  Status status;
};
DecodedMessage decode_message(uint16_t type, std::span<const uint8_t> payload);

}  // namespace ferry::wire
