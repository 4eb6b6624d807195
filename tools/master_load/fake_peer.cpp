#include "fake_peer.h"

#include "core/dtype.h"
#include "net/transport.h"

namespace ferry::master_load {
namespace {

// Loopback-like figures for every link: all alike, so ring order is a tie.
constexpr uint64_t kLinkBytesPerS = 1'000'000'000;
constexpr uint32_t kLinkRttUs = 100;
constexpr uint64_t kProbedBytes = 1 << 20;
// A port nobody dials: the master only passes it on, and these peers never dial each other.
constexpr uint16_t kAdvertisedPort = 9;
// As peer/communicator.cpp's kLinkReportInterval.
constexpr auto kLinkReportInterval = std::chrono::milliseconds(1000);
// A tiny f32 sum: only what the master compares matters, never the data.
constexpr uint64_t kElements = 16;

// What a fake peer says it measured of from -> to.
wire::LinkEntry made_up_link(uint64_t from, uint64_t to, uint64_t bytes) {
  return wire::LinkEntry{.from_peer = from, .to_peer = to, .goodput_bps = kLinkBytesPerS,
                         .delivery_rate_bps = kLinkBytesPerS, .rtt_us = kLinkRttUs, .bytes = bytes, .connections = 1};
}

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
  const uint64_t self = id_.load();
  successor_ = 0;
  for (size_t i = 0; i < topology.ring.size() && topology.ring.size() > 1; ++i)
    if (topology.ring[i].peer_id == self) successor_ = topology.ring[(i + 1) % topology.ring.size()].peer_id;
  session_->send(wire::TopologyReady{.epoch = topology.epoch});
}

void FakePeer::on_topology_done(const wire::TopologyDone& done) {
  epoch_.store(done.epoch);
  tally_.note(Event::topology_done);
}

void FakePeer::on_collective_go(const wire::CollectiveGo& go) {
  session_->send(wire::CollectiveEnd{.epoch = go.epoch, .seq = go.seq});
}

void FakePeer::on_collective_result(const wire::CollectiveResult& result) {
  tally_.note(result.code == 0 ? Event::committed : Event::aborted);
  if (result.code == 0) maybe_report_link();
  if (result.epoch == epoch_.load() && result.seq + 1 < rounds_.load()) begin(result.seq + 1);
}

void FakePeer::maybe_report_link() {
  const Clock::time_point now = Clock::now();
  if (successor_ == 0 || now - last_link_report_ < kLinkReportInterval) return;
  last_link_report_ = now;
  session_->send(wire::LinkReport{.links = {made_up_link(id_.load(), successor_, kElements * sizeof(float))}});
}

void FakePeer::on_probe_round(const wire::ProbeRound& round) {
  wire::ProbeDone done;
  done.epoch = round.epoch;
  done.round = round.round;
  for (const wire::RingMember& target : round.targets)
    done.links.push_back(made_up_link(id_.load(), target.peer_id, kProbedBytes));
  session_->send(done);
}

void FakePeer::on_session_failed(const Status& why) {
  if (left_.load()) return;
  tally_.fail("fake peer " + std::to_string(index_) + " (group " + std::to_string(group_) + "): " + why.message);
}

}  // namespace ferry::master_load
