#include "peer/link_setup.h"

#include <algorithm>
#include <asio/dispatch.hpp>
#include <asio/strand.hpp>

#include "core/duration_text.h"
#include "net/frame_io.h"
#include "net/host_identity.h"
#include "net/shm_stream.h"
#include "core/log.h"
#include "net/punch.h"
#include "peer/lane_dialer.h"
#include "peer/p2p_handshake.h"
#include "peer/relay_hop.h"

namespace ferry::peer {

LinkSetup::LinkSetup(asio::any_io_executor executor, LinkOptions options, uint64_t self_id,
                     const wire::Topology& topology, Done done, SettledLink resume)
    : executor_(executor), options_(std::move(options)), self_id_(self_id), topology_(topology), resume_(resume),
      strand_(asio::make_strand(executor)), timer_(strand_), done_(std::move(done)) {
  size_t n = topology_.ring.size();
  for (size_t i = 0; i < n; ++i)
    if (topology_.ring[i].peer_id == self_id_) rank_ = static_cast<uint32_t>(i);
  next_ = topology_.ring[(rank_ + 1) % n];
  prev_ = topology_.ring[(rank_ + n - 1) % n];
  const wire::LinkDial out = topology_.link_dial(rank_), in = topology_.link_dial((rank_ + n - 1) % n);
  dials_out_ = out == wire::LinkDial::sender;
  punch_out_ = out == wire::LinkDial::both;
  dials_in_ = in == wire::LinkDial::receiver;
  punch_in_ = in == wire::LinkDial::both;
  relay_out_ = out == wire::LinkDial::relay;
  relay_in_ = in == wire::LinkDial::relay;
  out_.resize(n > 1 ? topology_.p2p_connections : 0);
  in_.resize(out_.size());
}

void LinkSetup::start() {
  if (out_.empty()) return finish({Status::success(), nullptr, 0});
  asio::dispatch(strand_, [self = shared_from_this()] { self->arm_timer(); });
  for (uint32_t lane = 0; lane < out_.size(); ++lane) {
    if (dials_out_) dial_lane(true, lane);
    if (punch_out_) punch_lane(true, lane);
    if (dials_in_) dial_lane(false, lane);
    if (punch_in_) punch_lane(false, lane);
    if (relay_out_) relay_lane(true, lane);
    if (relay_in_) relay_lane(false, lane);
  }
}

bool LinkSetup::accepted_lanes_up() const {
  return (opens_out() || out_ready_ == out_.size()) && (opens_in() || in_ready_ == in_.size());
}

void LinkSetup::arm_timer() {
  // First, the first lane of each link a neighbour dials here: a dial the
  // network swallows (a firewall dropping SYNs) fails at connect_timeout on its
  // side, and waiting the whole timeout here would cost the master that much per ring it tries.
  const auto first = silent_link_deadline(options_);
  timer_.expires_after(first);
  timer_.async_wait([self = shared_from_this(), first](std::error_code ec) {
    if (ec) return;
    bool heard;
    {
      std::lock_guard lock(self->mu_);
      auto any = [](const auto& lanes) {
        return std::any_of(lanes.begin(), lanes.end(), [](const auto& lane) { return lane != nullptr; });
      };
      heard = (self->opens_in() || any(self->in_)) && (self->opens_out() || any(self->out_));
    }
    if (!heard) return self->deadline_passed(false, first);
    self->timer_.expires_after(self->options_.timeout - first);
    self->timer_.async_wait([self](std::error_code ec2) {
      if (!ec2) self->deadline_passed(true, self->options_.timeout);
    });
  });
}

void LinkSetup::deadline_passed(bool whole, std::chrono::milliseconds waited) {
  bool outgoing_missing;
  std::optional<Outcome> failed;
  {
    std::lock_guard lock(mu_);
    // At the first deadline only the silence is certain: of the previous peer's
    // dial when it dials here, else of the next peer's.
    auto silent = [](const auto& lanes) {
      return std::none_of(lanes.begin(), lanes.end(), [](const auto& lane) { return lane != nullptr; });
    };
    outgoing_missing = whole ? out_ready_ < out_.size() : opens_in() || !silent(in_);
    failed = std::move(dial_failure_);
  }
  if (failed) return finish(std::move(*failed));  // the dial's failure, not a timeout's guess
  const auto& blame = outgoing_missing ? next_ : prev_;
  finish({Status::failure(Errc::timeout, std::string(outgoing_missing ? "links to" : "links from") + " peer " +
                                             std::to_string(blame.peer_id) + " (" + blame.host + ":" +
                                             std::to_string(blame.port) + ") not up within " + ms(waited)),
          nullptr, blame.peer_id});
}

void LinkSetup::dial_lane(bool outgoing, uint32_t lane) {
  auto self = shared_from_this();
  const wire::RingMember& target = outgoing ? next_ : prev_;
  wire::LinkHello hello{.from_peer = outgoing ? self_id_ : prev_.peer_id,
                        .to_peer = outgoing ? next_.peer_id : self_id_,
                        .epoch = topology_.epoch,
                        .lane = lane,
                        .lanes = static_cast<uint32_t>(out_.size()),
                        .receiver_dials = outgoing ? uint8_t{0} : uint8_t{1}};
  peer::dial_lane(executor_, options_, target, hello, /*offer_shared_memory=*/outgoing,
                  [self, outgoing, lane, target_id = target.peer_id](Status st, std::shared_ptr<net::Stream> stream,
                                                                     bool shared_memory) {
                    if (st.ok()) return self->lane_ready(outgoing, lane, std::move(stream), shared_memory);
                    self->lane_failed(target_id, st);
                  });
}

void LinkSetup::lane_failed(uint64_t target_id, const Status& st) {
  // Out of local resources: this peer's own trouble, so it names itself, not the neighbour.
  if (st.code == Errc::system) return dial_failed({st, nullptr, self_id_});
  Errc code = st.code == Errc::timeout || st.code == Errc::auth ? st.code : Errc::connect;
  dial_failed({Status::failure(code, "peer " + std::to_string(target_id) + ": " + st.message), nullptr, target_id});
}

void LinkSetup::punch_lane(bool outgoing, uint32_t lane) {
  auto self = shared_from_this();
  const wire::RingMember& target = outgoing ? next_ : prev_;
  const size_t n = topology_.ring.size();
  const uint32_t link = outgoing ? rank_ : static_cast<uint32_t>((rank_ + n - 1) % n);  // its sender's rank
  const uint64_t key = net::punch_key({topology_.epoch, topology_.peer_group});
  const uint32_t slot = link * static_cast<uint32_t>(out_.size()) + lane;
  const int own_end = outgoing ? 0 : 1;
  const uint16_t local_port = net::punch_port(net::PunchUse::ring_link, key, slot, own_end);
  const net::Endpoint remote{target.host, net::punch_port(net::PunchUse::ring_link, key, slot, 1 - own_end)};
  auto failed = [self, target_id = target.peer_id](const Status& st) { self->lane_failed(target_id, st); };
  // The sender is the TLS client and says the hello, as it would over a lane it dialed.
  net::punch(
      executor_, local_port, remote, std::min(options_.timeout, options_.connect_timeout), options_.transport,
      /*client=*/outgoing,
      [self, outgoing, lane, failed](Status st, std::shared_ptr<net::Stream> stream) {
        if (!st.ok()) return failed(st);
        self->greet_opened(outgoing, lane, std::move(stream), wire::LinkDial::both);
      },
      options_.tuning);
}

void LinkSetup::relay_lane(bool outgoing, uint32_t lane) {
  auto self = shared_from_this();
  const size_t n = topology_.ring.size();
  const wire::RingMember& target = outgoing ? next_ : prev_;
  const uint64_t relay_id = topology_.relay_of(outgoing ? rank_ : (rank_ + n - 1) % n);
  auto failed = [self, target_id = target.peer_id](const Status& st) { self->lane_failed(target_id, st); };
  auto relay = std::find_if(topology_.ring.begin(), topology_.ring.end(),
                            [&](const wire::RingMember& m) { return m.peer_id == relay_id; });
  if (relay == topology_.ring.end() || relay->relay_port == 0 || relay_id == self_id_)
    return failed(Status::failure(Errc::protocol, "the topology names no relay for this link"));
  wire::RelayHello hello{.from_peer = self_id_,
                         .sender = outgoing ? self_id_ : prev_.peer_id,
                         .receiver = outgoing ? next_.peer_id : self_id_,
                         .epoch = topology_.epoch,
                         .lane = lane,
                         .lanes = static_cast<uint32_t>(out_.size())};
  open_relay_hop(executor_, options_, *relay, hello, [self, outgoing, lane, failed](Status st, asio::ip::tcp::socket raw) {
    if (!st.ok()) return failed(st);
    // End to end through the relay: the sender is the TLS client, as on a lane it dials.
    auto opened = [self, outgoing, lane, failed](Status ost, std::shared_ptr<net::Stream> stream) {
      if (!ost.ok()) return failed(ost);
      self->greet_opened(outgoing, lane, std::move(stream), wire::LinkDial::relay);
    };
    if (outgoing)
      self->options_.transport->open_client(std::move(raw), opened);
    else
      self->options_.transport->open_server(std::move(raw), opened);
  });
}

void LinkSetup::greet_opened(bool outgoing, uint32_t lane, std::shared_ptr<net::Stream> stream, wire::LinkDial how) {
  auto self = shared_from_this();
  if (!outgoing) return welcome_opened(lane, std::move(stream), how);
  auto failed = [self, target_id = next_.peer_id](const Status& st) { self->lane_failed(target_id, st); };
  wire::LinkHello hello{.from_peer = self_id_,
                        .to_peer = next_.peer_id,
                        .epoch = topology_.epoch,
                        .lane = lane,
                        .lanes = static_cast<uint32_t>(out_.size()),
                        .receiver_dials = static_cast<uint8_t>(how)};
  asio::dispatch(stream->executor(), [self, stream, hello, lane, failed] {
    dialer_handshake(stream, hello, self->options_.secret, self->options_.timeout,
                     [self, stream, lane, failed](Status hst, bool) {
                       if (!hst.ok()) return failed(hst);
                       self->lane_ready(true, lane, stream, false);
                     });
  });
}

void LinkSetup::welcome_opened(uint32_t lane, std::shared_ptr<net::Stream> stream, wire::LinkDial how) {
  auto self = shared_from_this();
  asio::dispatch(stream->executor(), [self, stream, lane, how] {
    acceptor_handshake(stream, self->options_.secret, self->options_.timeout,
                       [self, stream, lane, how](Status st, std::optional<AcceptedHello> accepted) {
                         const uint64_t prev = self->prev_.peer_id;
                         auto blame = [self, prev, how](const std::string& why) {
                           self->dial_failed({Status::failure(Errc::connect,
                                                              std::string(how == wire::LinkDial::relay ? "relayed"
                                                                                                       : "punched") +
                                                                  " link from peer " + std::to_string(prev) + ": " + why),
                                              nullptr, prev});
                         };
                         if (!st.ok()) return blame(st.message);
                         const auto* hello = std::get_if<wire::LinkHello>(&accepted->hello);
                         if (!hello || hello->receiver_dials != static_cast<uint8_t>(how) || hello->from_peer != prev ||
                             hello->to_peer != self->self_id_ || hello->epoch != self->topology_.epoch ||
                             hello->lane != lane || hello->lanes != self->in_.size()) {
                           stream->close();
                           return blame("its hello is not for this lane");
                         }
                         wire::LinkWelcome welcome{.proof = accepted->welcome_proof};
                         net::write_one_message(stream, welcome, [self, stream, lane, blame](Status wst) {
                           if (!wst.ok()) return blame(wst.message);
                           self->lane_ready(false, lane, stream, false);
                         });
                       });
  });
}

std::shared_ptr<net::Stream> LinkSetup::accept_ring(const wire::LinkHello& hello,
                                                    const std::shared_ptr<net::Stream>& stream) {
  if (!options_.same_host.enabled || hello.shm_ring.empty() || hello.host_key.empty() ||
      hello.host_key != net::same_host_key())
    return stream;
  try {
    return std::make_shared<net::ShmStream>(stream, net::ShmRing::attach(hello.shm_ring));
  } catch (const Error& e) {
    log().info("ring link from peer {} stays on TCP: {}", prev_.peer_id, e.what());
    return stream;
  }
}

bool LinkSetup::offer_inbound(const wire::LinkHello& hello, const std::string& welcome_proof,
                              const std::shared_ptr<net::Stream>& stream) {
  // A hello for the link from the previous peer, which it dials; or for the
  // link to the next peer, which that peer dials as its receiver.
  // A punched or relayed lane never comes through the listener (welcome_opened takes it).
  if (hello.punched() || hello.relayed()) return false;
  const bool outgoing = hello.receiver_dialed();
  {
    std::lock_guard lock(mu_);
    auto& lanes = outgoing ? out_ : in_;
    bool ours = outgoing ? !opens_out() && hello.from_peer == self_id_ && hello.to_peer == next_.peer_id
                         : !opens_in() && hello.from_peer == prev_.peer_id && hello.to_peer == self_id_;
    if (!done_ || !ours || hello.epoch != topology_.epoch || hello.lanes != lanes.size() ||
        hello.lane >= lanes.size() || lanes[hello.lane])
      return false;
    lanes[hello.lane] = stream;  // reserved; counted as ready once the welcome is out
  }
  auto self = shared_from_this();
  auto lane_stream = outgoing ? stream : accept_ring(hello, stream);
  uint8_t shm = lane_stream != stream ? 1 : 0;
  const wire::RingMember& dialer = outgoing ? next_ : prev_;
  asio::dispatch(stream->executor(), [self, stream, lane_stream, shm, outgoing, lane = hello.lane, welcome_proof,
                                      dialer_id = dialer.peer_id] {
    wire::LinkWelcome welcome{.proof = welcome_proof, .shm = shm};
    net::write_one_message(stream, welcome, [self, stream, lane_stream, outgoing, lane, dialer_id](Status st) {
      if (!st.ok())
        return self->finish({Status::failure(Errc::peer_lost, std::string(outgoing ? "link to" : "link from") +
                                                                  " peer " + std::to_string(dialer_id) + ": " +
                                                                  st.message),
                             nullptr, dialer_id});
      self->lane_ready(outgoing, lane, lane_stream, lane_stream != stream);
    });
  });
  return true;
}

void LinkSetup::dial_failed(Outcome outcome) {
  {
    std::lock_guard lock(mu_);
    if (!done_ || dial_failure_) return;
    // Closing the lanes a neighbour dialed here now would make it blame us for
    // a link that is fine: report once they are all up (or the timer fires).
    if (!accepted_lanes_up()) {
      dial_failure_ = std::move(outcome);
      return;
    }
  }
  finish(std::move(outcome));
}

void LinkSetup::lane_ready(bool outgoing, uint32_t lane, std::shared_ptr<net::Stream> stream, bool shared_memory) {
  std::shared_ptr<RingLinks> links;
  std::vector<std::shared_ptr<net::Stream>> out, in;
  SharedMemoryLanes shared_memory_lanes;
  std::optional<Outcome> failed;
  {
    std::lock_guard lock(mu_);
    if (!done_) {
      stream->close();
      return;
    }
    (outgoing ? out_ : in_)[lane] = std::move(stream);
    ++(outgoing ? out_ready_ : in_ready_);
    if (shared_memory) ++(outgoing ? shared_memory_.out : shared_memory_.in);
    if (dial_failure_) {
      if (!accepted_lanes_up()) return;
      failed = std::move(dial_failure_);
    } else {
      if (out_ready_ < out_.size() || in_ready_ < in_.size()) return;
      out = out_;
      in = in_;
      shared_memory_lanes = shared_memory_;
    }
  }
  if (failed) return finish(std::move(*failed));
  links = std::make_shared<RingLinks>(topology_.epoch, static_cast<uint32_t>(out.size()), options_.ops,
                                      shared_memory_lanes, growth(static_cast<uint32_t>(out.size())));
  // A full descriptor table or thread limit here is this peer's own: it names itself, not a neighbour.
  if (Status st = links->start(std::move(out), std::move(in)); !st.ok()) return finish({st, nullptr, self_id_});
  finish({Status::success(), links, 0});
}

LaneGrowth LinkSetup::growth(uint32_t lanes) const {
  // The sender measures and dials further lanes: a link its receiver dials keeps its count.
  if (!dials_out_) return {0, false, resume_, nullptr};
  // Further lanes are plain TCP: a link over shared memory never grows.
  auto dial = [executor = executor_, options = options_, next = next_,
               hello_base = wire::LinkHello{.from_peer = self_id_, .to_peer = next_.peer_id, .epoch = topology_.epoch,
                                            .lanes = lanes}](uint32_t lane, LaneGrowth::Done done) {
    wire::LinkHello hello = hello_base;
    hello.lane = lane;
    peer::dial_lane(executor, options, next, hello, false,
                    [done = std::move(done)](Status st, std::shared_ptr<net::Stream> stream, bool) {
                      done(st, std::move(stream));
                    });
  };
  return {options_.max_lanes, options_.bbr_allowed, resume_, dial};
}

void LinkSetup::cancel(const Status& why) { finish({why, nullptr, 0}); }

void LinkSetup::finish(Outcome outcome) {
  Done done;
  std::vector<std::shared_ptr<net::Stream>> streams;
  {
    std::lock_guard lock(mu_);
    if (!done_) return;
    done = std::move(done_);
    done_ = nullptr;
    if (!outcome.status.ok()) {
      for (auto& s : out_) if (s) streams.push_back(s);
      for (auto& s : in_) if (s) streams.push_back(s);
    }
  }
  asio::dispatch(strand_, [self = shared_from_this()] { self->timer_.cancel(); });
  for (auto& s : streams) asio::dispatch(s->executor(), [s] { s->close(); });
  done(std::move(outcome));
}

}  // namespace ferry::peer
