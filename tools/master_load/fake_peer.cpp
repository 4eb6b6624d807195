#include "fake_peer.h"

#include "core/dtype.h"
#include "net/transport.h"

namespace ferry::master_load {
namespace {

// Loopback-like figures for every probed link: all alike, so ring order is a tie.
constexpr uint64_t kProbedBytesPerS = 1'000'000'000;
constexpr uint32_t kProbedRttUs = 100;
constexpr uint64_t kProbedBytes = 1 << 20;
// A port nobody dials: the master only passes it on, and these peers never dial each other.
constexpr uint16_t kAdvertisedPort = 9;
// A tiny f32 sum: only what the master compares matters, never the data.
constexpr uint64_t kElements = 16;

}  // namespace

FakePeer::FakePeer(asio::any_io_executor executor, const net::Endpoint& master, uint32_t group, uint32_t index,
                   LoadTally& tally)
    : group_(group), index_(index), tally_(tally) {
  peer::MasterSession::Options options;
  options.master = master;
  options.transport = net::make_tcp_transport();
  session_ = std::make_unique<peer::MasterSession>(std::move(executor), options, *this);
}

FakePeer::~FakePeer() { leave(); }

void FakePeer::join() {
  wire::Hello hello;
  hello.peer_group = group_;
  hello.advertised_port = kAdvertisedPort;
  hello.p2p_connections = 1;
  hello.nonce = "fake-peer-" + std::to_string(index_);
  session_->open(std::move(hello));
}

void FakePeer::vote() { session_->send(wire::TopologyVote{}); }

void FakePeer::run_collectives(uint32_t rounds) {
  rounds_.store(rounds);
  if (rounds > 0) begin(0);
}

void FakePeer::leave() {
  if (left_.exchange(true)) return;
  session_->leave();
  session_->wait_closed(Clock::now() + std::chrono::seconds(2));
}

void FakePeer::begin(uint32_t seq) {
  wire::CollectiveBegin begin;
  begin.epoch = epoch_.load();
  begin.seq = seq;
  begin.kind = static_cast<uint8_t>(wire::CollectiveKind::allreduce);
  begin.tag = seq;
  begin.count = kElements;
  begin.dtype = static_cast<uint8_t>(DType::f32);
  begin.op = static_cast<uint8_t>(ReduceOp::sum);
  session_->send(begin);
}

void FakePeer::on_welcome(uint64_t peer_id) {
  id_.store(peer_id);
  tally_.note(Event::welcomed);
}

void FakePeer::on_topology(const wire::Topology& topology) {
  session_->send(wire::TopologyReady{topology.epoch, 0, 0, ""});
}

void FakePeer::on_topology_done(const wire::TopologyDone& done) {
  epoch_.store(done.epoch);
  tally_.note(Event::topology_done);
}

void FakePeer::on_collective_go(const wire::CollectiveGo& go) {
  session_->send(wire::CollectiveEnd{go.epoch, go.seq, 0, ""});
}

void FakePeer::on_collective_result(const wire::CollectiveResult& result) {
  tally_.note(result.code == 0 ? Event::committed : Event::aborted);
  if (result.epoch == epoch_.load() && result.seq + 1 < rounds_.load()) begin(result.seq + 1);
}

void FakePeer::on_probe_round(const wire::ProbeRound& round) {
  wire::ProbeDone done;
  done.epoch = round.epoch;
  done.round = round.round;
  for (const wire::RingMember& target : round.targets) {
    wire::LinkEntry link;
    link.from_peer = id_.load();
    link.to_peer = target.peer_id;
    link.goodput_bps = kProbedBytesPerS;
    link.delivery_rate_bps = kProbedBytesPerS;
    link.rtt_us = kProbedRttUs;
    link.bytes = kProbedBytes;
    link.connections = 1;
    done.links.push_back(link);
  }
  session_->send(done);
}

void FakePeer::on_session_failed(const Status& why) {
  if (left_.load()) return;
  tally_.fail("fake peer " + std::to_string(index_) + " (group " + std::to_string(group_) + "): " + why.message);
}

}  // namespace ferry::master_load
