#include "peer/ring_membership.h"

#include <algorithm>

#include <asio/dispatch.hpp>
#include <asio/post.hpp>

#include "core/log.h"
#include "net/frame_io.h"

namespace ferry::peer {
namespace {

constexpr size_t kMaxParkedLinks = 256;
constexpr size_t kMaxSettledLinks = 1024;
// Links change over seconds, collectives may come every millisecond: one report a second at most.
constexpr std::chrono::milliseconds kLinkReportInterval{1'000};

void release(const std::shared_ptr<RingLinks>& links, const Status& why) {
  if (!links) return;
  links->close(why);
  links->join();
}

}  // namespace

RingMembership::RingMembership(asio::any_io_executor executor, LinkOptions options, SendReady send_ready,
                               SendReport send_report)
    : executor_(std::move(executor)),
      options_(std::move(options)),
      send_ready_(std::move(send_ready)),
      send_report_(std::move(send_report)) {}

RingMembership::~RingMembership() {
  close(Status::failure(Errc::invalid_usage, "the communicator was destroyed"));
  join();
}

void RingMembership::set_self(uint64_t peer_id) {
  std::lock_guard lock(mu_);
  self_ = peer_id;
}

Status RingMembership::propose(const wire::Topology& topology) {
  std::shared_ptr<LinkSetup> old_setup, setup;
  std::shared_ptr<RingLinks> old_links, old_proposed;
  std::vector<ParkedLink> parked;
  uint64_t self;
  {
    std::lock_guard lock(mu_);
    self = self_;
    bool member = false;
    for (const auto& m : topology.ring) member |= m.peer_id == self_;
    const bool known_dials = std::all_of(topology.receiver_dials.begin(), topology.receiver_dials.end(),
                                         [](uint8_t d) { return d <= static_cast<uint8_t>(wire::LinkDial::relay); });
    if (!member || topology.p2p_connections == 0 || topology.p2p_connections > wire::kMaxConnectionsPerLink ||
        !known_dials)
      return Status::failure(Errc::protocol, "the master proposed a ring this peer cannot use");
    if (closed_) return Status::success();
    old_setup = std::exchange(setup_, nullptr);
    old_proposed = std::exchange(proposed_links_, nullptr);
    // The ring is being rebuilt: the old links go now (no collective may be in flight).
    old_links = committed_.links;
    remember_settled();
    proposed_ = topology;
    // The callback must name its own setup, to tell a superseded one apart.
    auto self_setup = std::make_shared<std::weak_ptr<LinkSetup>>();
    setup = std::make_shared<LinkSetup>(
        executor_, options_, self_, topology,
        [this, self_setup](LinkSetup::Outcome outcome) { on_links_ready(self_setup->lock(), std::move(outcome)); },
        settled_to(topology));
    *self_setup = setup;
    setup_ = setup;
    std::erase_if(parked_links_, [&](ParkedLink& p) {
      if (p.hello.epoch != topology.epoch) return false;
      parked.push_back(std::move(p));
      return true;
    });
  }
  Status rebuilt = Status::failure(Errc::peer_lost, "the ring is being rebuilt");
  if (old_setup) old_setup->cancel(rebuilt);
  release(old_proposed, rebuilt);
  release(old_links, rebuilt);
  log().debug("peer {} sets up links for epoch {} ({} peers)", self, topology.epoch, topology.ring.size());
  setup->start();
  for (auto& p : parked)
    if (!setup->offer_inbound(p.hello, p.welcome_proof, p.stream))
      asio::post(p.stream->executor(), [s = p.stream] { s->close(); });
  return Status::success();
}

void RingMembership::remember_settled() {
  const auto& ring = committed_.ring;
  if (!committed_.links || ring.size() < 2) return;
  SettledLink link = committed_.links->settled();
  if (link.lanes == 0) return;
  if (settled_.size() >= kMaxSettledLinks) settled_.clear();  // bounded: a long run meets many peers
  settled_[ring[(committed_.rank + 1) % ring.size()].peer_id] = link;
  last_settled_bbr_ = link.bbr;
}

SettledLink RingMembership::settled_to(const wire::Topology& topology) const {
  size_t n = topology.ring.size();
  for (size_t i = 0; i < n; ++i)
    if (topology.ring[i].peer_id == self_) {
      auto it = settled_.find(topology.ring[(i + 1) % n].peer_id);
      // A new next peer: its count is its path's, but where bbr paid on this
      // peer's last link it likely pays on the next (the same uplink's loss).
      return it == settled_.end() ? SettledLink{0, last_settled_bbr_} : it->second;
    }
  return {};
}

void RingMembership::on_links_ready(const std::shared_ptr<LinkSetup>& setup, LinkSetup::Outcome outcome) {
  bool current;
  {
    std::lock_guard lock(mu_);
    current = setup && setup_ == setup && !closed_;
    if (current) proposed_links_ = outcome.links;
  }
  if (!current) return release(outcome.links, Status::failure(Errc::peer_lost, "superseded ring"));
  if (!outcome.status.ok()) log().warn("links for epoch {} failed: {}", setup->epoch(), outcome.status.message);
  send_ready_(wire::TopologyReady{.epoch = setup->epoch(),
                                  .code = static_cast<uint32_t>(outcome.status.code),
                                  .unreachable_peer = outcome.unreachable_peer,
                                  .reason = wire::bounded_reason(outcome.status.message)});
}

RingMembership::Commit RingMembership::commit(const wire::TopologyDone& done) {
  std::lock_guard lock(mu_);
  Commit result;
  if (proposed_ && proposed_->epoch == done.epoch) {
    committed_.has_ring = true;
    committed_.epoch = done.epoch;
    committed_.ring = proposed_->ring;
    committed_.lanes = proposed_->p2p_connections;
    for (uint32_t i = 0; i < committed_.ring.size(); ++i)
      if (committed_.ring[i].peer_id == self_) committed_.rank = i;
    committed_.next_relay = proposed_->link_dial(committed_.rank) == wire::LinkDial::relay
                                ? proposed_->relay_of(committed_.rank)
                                : 0;
    committed_.links = std::exchange(proposed_links_, nullptr);
    if (!committed_.links) {  // a world of one: no lanes, but links all the same (they route nothing)
      committed_.links = std::make_shared<RingLinks>(done.epoch, 0, options_.ops);
      (void)committed_.links->start({}, {});  // no lanes: nothing to make, nothing to fail
    }
    proposed_.reset();
    setup_.reset();
    result = Commit::installed;
  } else if (!proposed_ && committed_.has_ring && done.epoch > committed_.epoch) {
    committed_.epoch = done.epoch;
    result = Commit::renewed;
  } else if (done.epoch == committed_.epoch && committed_.has_ring) {
    result = Commit::repeated;
  } else {
    return Commit::stale;
  }
  committed_.world = done;
  return result;
}

void RingMembership::offer_link(const wire::LinkHello& hello, const std::string& welcome_proof,
                                const std::shared_ptr<net::Stream>& stream) {
  std::shared_ptr<RingLinks> grown;
  {
    std::lock_guard lock(mu_);
    if (setup_ && setup_->offer_inbound(hello, welcome_proof, stream)) return;
    if (is_further_lane(hello)) grown = committed_.links;
  }
  if (grown) return welcome_further_lane(grown, hello.lane, welcome_proof, stream);
  refuse_or_park(hello, welcome_proof, stream);
}

void RingMembership::refuse_or_park(const wire::LinkHello& hello, const std::string& welcome_proof,
                                    const std::shared_ptr<net::Stream>& stream) {
  std::string refusal;
  {
    std::lock_guard lock(mu_);
    // A proposal may have arrived since offer_link looked: its set-up takes the hello now.
    if (setup_ && setup_->offer_inbound(hello, welcome_proof, stream)) return;
    uint64_t known = proposed_ ? proposed_->epoch : committed_.epoch;
    auto now = Clock::now();
    std::erase_if(parked_links_, [&](const ParkedLink& p) { return now - p.since > options_.timeout; });
    // Before our welcome we do not even know our own id: the hello may still be for us.
    bool for_us = self_ == 0 || hello.acceptor() == self_;
    if (!closed_ && for_us && hello.epoch > known && parked_links_.size() < kMaxParkedLinks) {
      // Its sender heard of the ring before we did; keep it until our proposal arrives.
      parked_links_.push_back({hello, welcome_proof, stream, now});
      return;
    }
    refusal = "link_hello for epoch " + std::to_string(hello.epoch) + " from peer " + std::to_string(hello.dialer()) +
              " does not match this peer's ring";
  }
  log().debug("refused a link: {}", refusal);
  net::write_one_message(stream, wire::LinkWelcome{.code = static_cast<uint32_t>(Errc::protocol), .reason = refusal},
                         [stream](Status) { stream->close(); });
}

bool RingMembership::is_further_lane(const wire::LinkHello& hello) const {
  const auto& links = committed_.links;
  size_t n = committed_.ring.size();
  if (closed_ || !links || n < 2 || hello.receiver_dials || hello.to_peer != self_ || hello.epoch != links->epoch())
    return false;
  uint64_t prev = committed_.ring[(committed_.rank + n - 1) % n].peer_id;
  return hello.from_peer == prev && hello.lanes == links->lanes() && hello.lane >= links->lanes() &&
         hello.lane < wire::kMaxConnectionsPerLink && links->accepts_in_lane(hello.lane);
}

void RingMembership::welcome_further_lane(const std::shared_ptr<RingLinks>& links, uint32_t lane,
                                          const std::string& welcome_proof,
                                          const std::shared_ptr<net::Stream>& stream) {
  asio::dispatch(stream->executor(), [links, lane, welcome_proof, stream] {
    net::write_one_message(stream, wire::LinkWelcome{.proof = welcome_proof}, [links, lane, stream](Status st) {
      // Closed meanwhile: the dialer's lane sees the hang-up, as its link goes down anyway.
      if (!st.ok() || !links->add_in_lane(lane, stream)) stream->close();
    });
  });
}

RingMembership::View RingMembership::view() const {
  std::lock_guard lock(mu_);
  return committed_;
}

void RingMembership::close(const Status& why) {
  std::shared_ptr<LinkSetup> setup;
  std::vector<std::shared_ptr<RingLinks>> links;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    setup = std::exchange(setup_, nullptr);
    for (auto* l : {&committed_.links, &proposed_links_})
      if (*l) links.push_back(*l);
    proposed_links_.reset();
    parked_links_.clear();
    closing_.insert(closing_.end(), links.begin(), links.end());
  }
  if (setup) setup->cancel(why);
  for (auto& l : links) l->close(why);
}

void RingMembership::join() {
  std::vector<std::shared_ptr<RingLinks>> links;
  {
    std::lock_guard lock(mu_);
    links.swap(closing_);
  }
  for (auto& l : links) l->join();
}

void RingMembership::report_links(bool now) {
  auto committed = view();
  if (!committed.links || committed.ring.size() < 2) return;
  // Held through the send: a query that follows a report on another thread then follows it on the wire too.
  std::lock_guard lock(report_mu_);
  auto at = Clock::now();
  if (!now && at - last_link_report_ < kLinkReportInterval) return;
  last_link_report_ = at;
  const auto& ring = committed.ring;
  uint64_t self = ring[committed.rank].peer_id, next = ring[(committed.rank + 1) % ring.size()].peer_id;
  if (auto entry = committed.links->measure(self, next)) send_report_(wire::LinkReport{.links = {*entry}});
}

bool RingMembership::links_broken() const {
  auto links = view().links;
  return links && !links->failure().ok();
}

}  // namespace ferry::peer
