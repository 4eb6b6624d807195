#include "peer/link_setup.h"

#include <algorithm>
#include <asio/dispatch.hpp>
#include <asio/strand.hpp>

#include "core/duration_text.h"
#include "net/frame_io.h"
#include "net/host_identity.h"
#include "net/shm_stream.h"
#include "core/log.h"
#include "peer/lane_dialer.h"

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
  out_.resize(n > 1 ? topology_.p2p_connections : 0);
  in_.resize(out_.size());
}

void LinkSetup::start() {
  if (out_.empty()) return finish({Status::success(), nullptr, 0});
  asio::dispatch(strand_, [self = shared_from_this()] { self->arm_timer(); });
  for (uint32_t lane = 0; lane < out_.size(); ++lane) dial_lane(lane);
}

void LinkSetup::arm_timer() {
  // First, the previous peer's first lane: a dial the network swallows (a
  // firewall dropping SYNs) fails at connect_timeout on its side, and waiting
  // the whole timeout here would cost the master that much per ring it tries.
  const auto first = silent_link_deadline(options_);
  timer_.expires_after(first);
  timer_.async_wait([self = shared_from_this(), first](std::error_code ec) {
    if (ec) return;
    bool heard;
    {
      std::lock_guard lock(self->mu_);
      heard = std::any_of(self->in_.begin(), self->in_.end(), [](const auto& lane) { return lane != nullptr; });
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
    outgoing_missing = whole && out_ready_ < out_.size();  // at the first deadline only the silence is certain
    failed = std::move(outgoing_failure_);
  }
  if (failed) return finish(std::move(*failed));  // the dial's failure, not a timeout's guess
  const auto& blame = outgoing_missing ? next_ : prev_;
  finish({Status::failure(Errc::timeout, std::string(outgoing_missing ? "links to" : "links from") + " peer " +
                                             std::to_string(blame.peer_id) + " (" + blame.host + ":" +
                                             std::to_string(blame.port) + ") not up within " + ms(waited)),
          nullptr, blame.peer_id});
}

void LinkSetup::dial_lane(uint32_t lane) {
  auto self = shared_from_this();
  wire::LinkHello hello{.from_peer = self_id_,
                        .to_peer = next_.peer_id,
                        .epoch = topology_.epoch,
                        .lane = lane,
                        .lanes = static_cast<uint32_t>(out_.size())};
  peer::dial_lane(executor_, options_, next_, hello, true,
                  [self, lane](Status st, std::shared_ptr<net::Stream> stream, bool shared_memory) {
                    if (st.ok()) return self->lane_ready(true, lane, std::move(stream), shared_memory);
                    // Out of local resources: this peer's own trouble, so it names itself, not the next peer.
                    if (st.code == Errc::system) return self->outgoing_failed({st, nullptr, self->self_id_});
                    Errc code = st.code == Errc::timeout || st.code == Errc::auth ? st.code : Errc::connect;
                    self->outgoing_failed({Status::failure(code, "peer " + std::to_string(self->next_.peer_id) +
                                                                     ": " + st.message),
                                           nullptr, self->next_.peer_id});
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
  {
    std::lock_guard lock(mu_);
    if (!done_ || hello.epoch != topology_.epoch || hello.to_peer != self_id_ || hello.from_peer != prev_.peer_id ||
        hello.lanes != in_.size() || hello.lane >= in_.size() || in_[hello.lane])
      return false;
    in_[hello.lane] = stream;  // reserved; counted as ready once the welcome is out
  }
  auto self = shared_from_this();
  auto lane_stream = accept_ring(hello, stream);
  uint8_t shm = lane_stream != stream ? 1 : 0;
  asio::dispatch(stream->executor(), [self, stream, lane_stream, shm, lane = hello.lane, welcome_proof] {
    wire::LinkWelcome welcome{.proof = welcome_proof, .shm = shm};
    net::write_one_message(stream, welcome, [self, stream, lane_stream, lane](Status st) {
      if (!st.ok())
        return self->finish({Status::failure(Errc::peer_lost, "link from peer " + std::to_string(self->prev_.peer_id) +
                                                                  ": " + st.message),
                             nullptr, self->prev_.peer_id});
      self->lane_ready(false, lane, lane_stream, lane_stream != stream);
    });
  });
  return true;
}

void LinkSetup::outgoing_failed(Outcome outcome) {
  {
    std::lock_guard lock(mu_);
    if (!done_ || outgoing_failure_) return;
    // Closing our inbound lanes now would make the previous peer blame us for
    // a link that is fine: report once they are all up (or the timer fires).
    if (in_ready_ < in_.size()) {
      outgoing_failure_ = std::move(outcome);
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
    if (outgoing_failure_) {
      if (in_ready_ < in_.size()) return;
      failed = std::move(outgoing_failure_);
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
