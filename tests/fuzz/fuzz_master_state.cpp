// libFuzzer target: MasterState fed a program of connects, messages and
// disconnects (master_program.h). The state machine must never crash or
// throw, and after every step these hold:
//  - its connection and peer counts match what its own effects imply
//    (connected - closed; welcomed - closed);
//  - every member of a group's ring or waiting list is a live, welcomed peer,
//    no peer appears twice, and none is both in the ring and waiting;
//  - every effect targets a live connection, and every message it sends
//    encodes within the wire limits (a peer could not decode it otherwise);
//  - with a run secret, a welcome only ever answers a hello whose proof was valid;
//  - a topology lists only live peers, each once;
// and once every connection is gone, nothing is left (no peers, no rings).
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/auth_labels.h"
#include "core/log.h"
#include "master/master_log.h"
#include "fuzz_input.h"
#include "master/master_state.h"
#include "master_program.h"
#include "wire/frame.h"

using namespace ferry;
using namespace ferry::fuzz::master_program;
using ferry::fuzz::FuzzInput;
using master::ConnId;
using master::PeerId;

namespace {

// Reasons the program may give are up to this long. The wire allows 1024;
// FERRY_FUZZ_MAX_REASON lowers it to look past a known finding (the master
// prefixes peers' reasons past the limit: see the test plan's report).
size_t max_reason() {
  static const size_t n = [] {
    const char* env = std::getenv("FERRY_FUZZ_MAX_REASON");
    return env ? static_cast<size_t>(std::strtoul(env, nullptr, 10)) : wire::kMaxReasonLength;
  }();
  return n;
}

std::string reason(FuzzInput& in, char fill) {
  size_t n = in.u16() % 1200;
  return std::string(n <= max_reason() ? n : max_reason(), fill);
}

const RunSecret& secret() {
  static const RunSecret s = RunSecret::from_bytes("the fuzzing run's secret, 32 bytes..");
  return s;
}

std::string nonce_for(ConnId conn) {
  std::string n = "challenge-" + std::to_string(conn);
  n.resize(kNonceBytes, '.');
  return n;
}

class Harness {
 public:
  Harness(bool with_secret, bool check_reachability)
      : with_secret_(with_secret),
        state_(master::MasterLimits{.reachability_check_ms = check_reachability ? 2000u : 0u},
               with_secret ? std::optional<RunSecret>(secret()) : std::nullopt) {}

  void run(FuzzInput& in) {
    while (!in.empty()) step(in);
    // Everyone leaves: nothing may be left behind.
    for (size_t slot = 0; slot < kSlots; ++slot)
      if (slots_[slot]) disconnect(slot);
    FERRY_FUZZ_CHECK(state_.connection_count() == 0, "connections left after every close");
    FERRY_FUZZ_CHECK(state_.peer_count() == 0, "peers left after every close");
    for (uint32_t g : groups_) {
      FERRY_FUZZ_CHECK(state_.ring(g).empty(), "a ring left after every close");
      FERRY_FUZZ_CHECK(state_.pending(g).empty(), "a waiting list left after every close");
    }
  }

 private:
  struct Conn {
    std::optional<PeerId> peer;
    uint32_t group = 0;             // of its hello
    bool hello_valid = false;       // its last hello carried a valid proof
    uint64_t topology_epoch = 0;    // of the last topology sent to it
  };

  void step(FuzzInput& in) {
    auto op = static_cast<Op>(in.u8() % kOpCount);
    size_t slot = in.u8() % kSlots;
    std::optional<ConnId>& id = slots_[slot];
    if (op == kConnect) {
      if (id) return;
      id = ++last_conn_;
      conns_[*id] = Conn{};
      live_.insert(*id);
      state_.on_connected(*id, "10.0.0." + std::to_string(slot), nonce_for(*id));
      return apply();
    }
    if (!id) return;
    ConnId conn = *id;
    Conn& c = conns_.at(conn);
    switch (op) {
      case kDisconnect:
        return disconnect(slot);
      case kHello: {
        wire::Hello h;
        h.peer_group = in.u8() % 3;
        uint8_t flags = in.u8();
        h.p2p_connections = in.u8();
        uint8_t hb = in.u8();
        h.heartbeat_timeout_ms = hb * 50u;
        h.advertised_port = (flags & 2) ? 0 : static_cast<uint16_t>(40000 + slot);
        if (flags & 4) h.advertised_host = "peer" + std::to_string(slot) + ".example";
        h.nonce = std::string(kNonceBytes, 'h');
        bool valid = with_secret_ && (flags & 1);
        if (valid) h.proof = secret().proof(auth_label::kPeerToMaster, nonce_for(conn), h.nonce);
        else if (with_secret_) h.proof = std::string(kProofBytes, 'x');
        c.hello_valid = valid;
        c.group = h.peer_group;
        groups_.insert(h.peer_group);
        return send(conn, h);
      }
      case kVote:
        return send(conn, wire::TopologyVote{static_cast<uint8_t>(in.u8() & 1)});
      case kReady: {
        wire::TopologyReady r;
        uint8_t epoch = in.u8();
        r.epoch = epoch ? epoch : c.topology_epoch;
        uint8_t code = in.u8();
        r.code = code < 200 ? 0 : code - 200u;
        r.unreachable_peer = in.u8();
        r.reason = reason(in, 'r');
        return send(conn, r);
      }
      case kPending:
        return send(conn, wire::PendingQuery{});
      case kBegin: {
        wire::CollectiveBegin b;
        b.epoch = current_epoch(c, in.u8());
        b.seq = in.u8() % 8;
        b.kind = in.u8() % 3;
        b.tag = in.u8() % 3;
        b.count = in.u8() % 3;
        b.dtype = in.u8() % 2;
        b.op = in.u8() % 2;
        return send(conn, b);
      }
      case kEnd: {
        wire::CollectiveEnd e;
        e.epoch = current_epoch(c, in.u8());
        e.seq = in.u8() % 8;
        uint8_t code = in.u8();
        e.code = code < 200 ? 0 : code - 200u;
        e.reason = reason(in, 'e');
        return send(conn, e);
      }
      case kSync: {
        wire::SyncBegin s;
        s.epoch = current_epoch(c, in.u8());
        s.seq = in.u8() % 8;
        s.revision = in.u8();
        s.strategy = in.u8() % 4;
        for (int n = in.u8() % 4; n > 0; --n) {
          static const char* kNames[] = {"w", "b", "opt"};
          wire::TensorDigest t;
          t.name = kNames[in.u8() % 3];
          t.dtype = in.u8() % 2;
          t.count = in.u8() % 3;
          t.hash = in.u8() % 3;
          t.allow_inequality = in.u8() & 1;
          s.tensors.push_back(t);
        }
        return send(conn, s);
      }
      case kLeave:
        return send(conn, wire::Leave{});
      case kReachable: {
        const bool reachable = in.u8() & 1;
        PeerId peer = c.peer.value_or(0);
        if (!checks_.empty()) {
          peer = checks_.front();
          checks_.pop_front();
        }
        state_.on_reachability(peer, reachable);
        return apply();
      }
      case kRaw: {
        uint16_t type = in.u16();
        auto payload = in.bytes(in.u8());
        auto decoded = wire::decode_message(type, payload);
        if (!decoded.message) return;  // the connection would close on it: a disconnect covers that
        if (const auto* h = std::get_if<wire::Hello>(&*decoded.message)) {
          c.hello_valid = false;  // nobody forges HMAC-SHA256 by mutation
          c.group = h->peer_group;
          groups_.insert(h->peer_group);
        }
        return send(conn, *decoded.message);
      }
      default:
        return;
    }
  }

  uint64_t current_epoch(const Conn& c, uint8_t raw) {
    if (raw) return raw;
    return c.peer ? state_.epoch(c.group) : 0;
  }

  void send(ConnId conn, const wire::Message& message) {
    state_.on_message(conn, message);
    apply();
  }

  void disconnect(size_t slot) {
    ConnId conn = *slots_[slot];
    state_.on_disconnected(conn, "fuzz: closed");
    forget(conn);
    apply();
  }

  void forget(ConnId conn) {
    live_.erase(conn);
    if (auto it = conns_.find(conn); it != conns_.end()) {
      if (it->second.peer) peers_.erase(*it->second.peer);
      conns_.erase(it);
    }
    for (auto& slot : slots_)
      if (slot == conn) slot.reset();
  }

  void apply() {
    master::Effects effects = state_.take_effects();
    for (const auto& s : effects.sends) {
      FERRY_FUZZ_CHECK(live_.count(s.conn), "a message to a connection that is not live");
      check_encodable(s.message);
      Conn& c = conns_.at(s.conn);
      if (const auto* w = std::get_if<wire::Welcome>(&s.message)) {
        FERRY_FUZZ_CHECK(!c.peer, "a second welcome on one connection");
        FERRY_FUZZ_CHECK(!with_secret_ || c.hello_valid, "welcomed without a valid proof of the run secret");
        FERRY_FUZZ_CHECK(!peers_.count(w->peer_id), "a peer id given twice");
        c.peer = w->peer_id;
        peers_[w->peer_id] = s.conn;
      }
      if (const auto* t = std::get_if<wire::Topology>(&s.message)) {
        c.topology_epoch = t->epoch;
        std::set<PeerId> seen;
        for (const auto& m : t->ring) {
          FERRY_FUZZ_CHECK(peers_.count(m.peer_id), "a topology lists a peer that is not live");
          FERRY_FUZZ_CHECK(seen.insert(m.peer_id).second, "a topology lists a peer twice");
        }
      }
    }
    for (const auto& d : effects.deadlines) FERRY_FUZZ_CHECK(live_.count(d.conn), "a deadline for a dead connection");
    for (const auto& check : effects.reachability_checks) {
      FERRY_FUZZ_CHECK(peers_.count(check.peer), "a reachability check of a peer that is not live");
      checks_.push_back(check.peer);
    }
    for (const auto& c : effects.closes) {
      FERRY_FUZZ_CHECK(live_.count(c.conn), "a close of a connection that is not live");
      if (c.last) check_encodable(*c.last);
      forget(c.conn);
    }
    check_state();
  }

  // A message a peer could not decode would cost the master that peer.
  static void check_encodable(const wire::Message& message) {
    std::vector<uint8_t> frame = wire::encode_message(message);
    FERRY_FUZZ_CHECK(frame.size() - wire::kFrameHeaderBytes <= wire::kMaxControlPayload, "a frame past the limit");
    std::span<const uint8_t> payload(frame.data() + wire::kFrameHeaderBytes, frame.size() - wire::kFrameHeaderBytes);
    auto decoded = wire::decode_message(static_cast<uint16_t>(wire::message_type(message)), payload);
    FERRY_FUZZ_CHECK(decoded.status.ok(), std::string("the master sent a message its peers cannot decode: ") +
                                              wire::message_type_name(static_cast<uint16_t>(wire::message_type(message))) +
                                              ": " + decoded.status.message);
  }

  void check_state() {
    FERRY_FUZZ_CHECK(state_.connection_count() == live_.size(), "connection count differs from the effects");
    FERRY_FUZZ_CHECK(state_.peer_count() == peers_.size(), "peer count differs from the effects");
    std::set<PeerId> placed;
    for (uint32_t g : groups_) {
      auto ring = state_.ring(g);
      auto waiting = state_.pending(g);
      for (PeerId id : ring) {
        FERRY_FUZZ_CHECK(peers_.count(id), "a ring member is not a live peer");
        FERRY_FUZZ_CHECK(placed.insert(id).second, "a peer is in a ring twice (or in two groups)");
      }
      for (PeerId id : waiting) {
        FERRY_FUZZ_CHECK(peers_.count(id), "a waiting peer is not live");
        FERRY_FUZZ_CHECK(placed.insert(id).second, "a peer is both waiting and in a ring, or waits twice");
      }
    }
  }

  bool with_secret_;
  master::MasterState state_;
  std::optional<ConnId> slots_[kSlots];
  ConnId last_conn_ = 0;
  std::set<ConnId> live_;
  std::map<ConnId, Conn> conns_;
  std::map<PeerId, ConnId> peers_;
  std::deque<PeerId> checks_;  // reachability checks the master asked for, not yet answered
  std::set<uint32_t> groups_{0, 1, 2};
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  set_log_level("off");
  ferry::master::set_master_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t flags = in.u8();
  Harness harness(flags & 1, flags & 2);
  try {
    harness.run(in);
  } catch (const std::exception& e) {
    fuzz::invariant_failed(std::string("MasterState threw: ") + e.what());
  }
  return 0;
}
