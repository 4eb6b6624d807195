#include "peer/link_setup.h"

#include <asio/dispatch.hpp>
#include <asio/strand.hpp>

#include "net/dialer.h"
#include "net/frame_io.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {

LinkSetup::LinkSetup(asio::any_io_executor executor, std::shared_ptr<net::Transport> transport,
                     net::SocketTuning tuning, std::shared_ptr<const RunSecret> secret, uint64_t self_id,
                     const wire::Topology& topology, std::chrono::milliseconds timeout, Done done)
    : executor_(executor), transport_(std::move(transport)), tuning_(std::move(tuning)), secret_(std::move(secret)),
      self_id_(self_id),
      topology_(topology),
      timeout_(timeout), strand_(asio::make_strand(executor)), timer_(strand_), done_(std::move(done)) {
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
  timer_.expires_after(timeout_);
  timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec) return;
    bool outgoing_missing;
    {
      std::lock_guard lock(self->mu_);
      outgoing_missing = self->out_ready_ < self->out_.size();
    }
    const auto& blame = outgoing_missing ? self->next_ : self->prev_;
    self->finish({Status::failure(Errc::timeout, std::string(outgoing_missing ? "links to" : "links from") +
                                                     " peer " + std::to_string(blame.peer_id) + " (" + blame.host +
                                                     ":" + std::to_string(blame.port) + ") not up within " +
                                                     std::to_string(self->timeout_.count()) + " ms"),
                  nullptr, blame.peer_id});
  });
}

void LinkSetup::dial_lane(uint32_t lane) {
  auto self = shared_from_this();
  auto fail = [self](const Status& st) {
    Errc code = st.code == Errc::timeout || st.code == Errc::auth ? st.code : Errc::connect;
    self->finish({Status::failure(code, "peer " + std::to_string(self->next_.peer_id) + ": " + st.message), nullptr,
                  self->next_.peer_id});
  };
  net::dial(
      executor_, {next_.host, next_.port}, timeout_, transport_,
      [self, lane, fail](Status st, std::shared_ptr<net::Stream> stream) {
        if (!st.ok()) return fail(st);
        wire::LinkHello hello{self->self_id_, self->next_.peer_id, self->topology_.epoch, lane,
                              static_cast<uint32_t>(self->out_.size()), {}, {}};
        asio::dispatch(stream->executor(), [self, lane, fail, stream, hello] {
          dialer_handshake(stream, hello, self->secret_, self->timeout_, [self, lane, fail, stream](Status hst) {
            if (!hst.ok()) return fail(hst);
            self->lane_ready(true, lane, stream);
          });
        });
      },
      tuning_);
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
  asio::dispatch(stream->executor(), [self, stream, lane = hello.lane, welcome_proof] {
    net::write_one_message(stream, wire::LinkWelcome{0, "", welcome_proof}, [self, stream, lane](Status st) {
      if (!st.ok())
        return self->finish({Status::failure(Errc::peer_lost, "link from peer " + std::to_string(self->prev_.peer_id) +
                                                                  ": " + st.message),
                             nullptr, self->prev_.peer_id});
      self->lane_ready(false, lane, stream);
    });
  });
  return true;
}

void LinkSetup::lane_ready(bool outgoing, uint32_t lane, std::shared_ptr<net::Stream> stream) {
  std::shared_ptr<RingLinks> links;
  std::vector<std::shared_ptr<net::Stream>> out, in;
  {
    std::lock_guard lock(mu_);
    if (!done_) {
      stream->close();
      return;
    }
    (outgoing ? out_ : in_)[lane] = std::move(stream);
    ++(outgoing ? out_ready_ : in_ready_);
    if (out_ready_ < out_.size() || in_ready_ < in_.size()) return;
    out = out_;
    in = in_;
  }
  links = std::make_shared<RingLinks>(topology_.epoch, static_cast<uint32_t>(out.size()));
  links->start(std::move(out), std::move(in));
  finish({Status::success(), links, 0});
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
