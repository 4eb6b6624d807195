#include "peer/relay_service.h"

#include <asio/dispatch.hpp>

#include "core/log.h"
#include "net/frame_io.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {

RelayService::RelayService(asio::any_io_executor executor, LinkOptions options)
    : executor_(std::move(executor)), options_(std::move(options)) {}

std::shared_ptr<RelayService> RelayService::start(asio::any_io_executor executor, const std::string& host,
                                                  LinkOptions options, uint64_t fd_limit) {
  auto service = std::make_shared<RelayService>(executor, std::move(options));
  service->listener_ = net::Listener::bind(executor, host, 0, 0);
  std::weak_ptr<RelayService> weak = service;
  service->listener_->start(
      net::StrangerGate::create("relay", net::StrangerLimits::within(fd_limit)),
      [weak](asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> pass) {
        auto self = weak.lock();
        if (!self) return;
        if (Status tuned = net::apply_tuning(socket, self->options_.tuning); !tuned.ok())
          log().warn("relay: {}", tuned.message);
        auto stream = std::make_shared<net::TcpStream>(std::move(socket));
        asio::dispatch(stream->executor(), [weak, stream, pass] {
          auto relay = weak.lock();
          if (!relay) return stream->close();
          acceptor_handshake(stream, relay->options_.secret, relay->options_.timeout,
                             [weak, stream, pass](Status st, std::optional<AcceptedHello> accepted) {
                               pass->release();  // proved, or refused and closed
                               auto s = weak.lock();
                               if (!st.ok() || !s) return stream->close();
                               const auto* hello = std::get_if<wire::RelayHello>(&accepted->hello);
                               if (!hello) return refuse(stream, "this is a relay port: only relay_hello is taken here");
                               s->on_hello(*hello, End{stream, accepted->welcome_proof, nullptr});
                             });
        });
      });
  return service;
}

void RelayService::refuse(const std::shared_ptr<net::Stream>& stream, const std::string& why) {
  wire::LinkWelcome no{.code = static_cast<uint32_t>(Errc::connect), .reason = wire::bounded_reason(why)};
  asio::dispatch(stream->executor(), [stream, no] {
    net::write_one_message(stream, no, [stream](Status) { stream->close(); });
  });
}

void RelayService::on_hello(const wire::RelayHello& hello, End end) {
  if (hello.lanes == 0 || hello.lanes > wire::kMaxConnectionsPerLink || hello.lane >= hello.lanes ||
      hello.sender == hello.receiver || (hello.from_peer != hello.sender && hello.from_peer != hello.receiver))
    return refuse(end.stream, "a relay_hello that names no lane of a link");
  const LaneKey key{hello.epoch, hello.sender, hello.receiver, hello.lane};
  const int side = hello.from_peer == hello.sender ? 0 : 1;
  std::vector<std::pair<End, End>> ready;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return end.stream->close();
    if (waiting_ends_ >= kMaxWaitingEnds) return refuse(end.stream, "the relay has too many lanes waiting");
    Waiting& waiting = waiting_[key];
    if (waiting.ends[side].stream || (waiting.lanes != 0 && waiting.lanes != hello.lanes)) {
      if (!waiting.ends[0].stream && !waiting.ends[1].stream) waiting_.erase(key);
      return refuse(end.stream, "that lane's end is already here, or its lane count differs");
    }
    waiting.lanes = hello.lanes;
    end.deadline = std::make_shared<asio::steady_timer>(end.stream->executor());
    end.deadline->expires_after(options_.timeout);
    end.deadline->async_wait([weak = weak_from_this(), key, side, stream = end.stream](std::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->give_up(key, side, stream);
    });
    waiting.ends[side] = std::move(end);
    ++waiting_ends_;
    ready = take_ready_locked();
  }
  for (auto& [sender, receiver] : ready) join(std::move(sender), std::move(receiver));
}

void RelayService::expect(const wire::Topology& topology, uint64_t self) {
  std::vector<std::pair<End, End>> ready;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    const size_t n = topology.ring.size();
    for (size_t i = 0; i < n; ++i)
      if (topology.link_dial(i) == wire::LinkDial::relay && topology.relay_of(i) == self)
        expected_[{topology.epoch, topology.ring[i].peer_id, topology.ring[(i + 1) % n].peer_id}] =
            topology.p2p_connections;
    // Only the latest rings' links: epochs only grow.
    std::vector<uint64_t> epochs;
    for (const auto& [link, lanes] : expected_)
      if (epochs.empty() || epochs.back() != std::get<0>(link)) epochs.push_back(std::get<0>(link));
    if (epochs.size() > kRememberedRings) {
      const uint64_t oldest_kept = epochs[epochs.size() - kRememberedRings];
      std::erase_if(expected_, [&](const auto& kv) { return std::get<0>(kv.first) < oldest_kept; });
    }
    ready = take_ready_locked();
  }
  for (auto& [sender, receiver] : ready) join(std::move(sender), std::move(receiver));
}

std::vector<std::pair<RelayService::End, RelayService::End>> RelayService::take_ready_locked() {
  std::vector<std::pair<End, End>> ready;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    const auto& [epoch, sender, receiver, lane] = it->first;
    auto expected = expected_.find({epoch, sender, receiver});
    Waiting& w = it->second;
    if (!w.ends[0].stream || !w.ends[1].stream || expected == expected_.end() || expected->second != w.lanes) {
      ++it;
      continue;
    }
    ready.emplace_back(std::move(w.ends[0]), std::move(w.ends[1]));
    waiting_ends_ -= 2;
    it = waiting_.erase(it);
  }
  return ready;
}

void RelayService::give_up(const LaneKey& key, int side, const std::shared_ptr<net::TcpStream>& stream) {
  {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(key);
    if (it == waiting_.end() || it->second.ends[side].stream != stream) return;  // joined meanwhile
    it->second.ends[side] = End{};
    --waiting_ends_;
    if (!it->second.ends[1 - side].stream) waiting_.erase(it);
  }
  refuse(stream, "the other end of the lane did not come, or this peer is not its relay, within " +
                     std::to_string(options_.timeout.count()) + " ms");
}

void RelayService::join(End sender, End receiver) {
  // Both welcomes out, then each socket leaves its stream (on that stream's strand) and
  // the splice takes the two.
  auto joining = std::make_shared<Joining>();
  joining->streams[0] = sender.stream;
  joining->streams[1] = receiver.stream;
  auto self = shared_from_this();
  for (End* end : {&sender, &receiver}) {
    const int side = end == &sender ? 0 : 1;
    // On the end's own strand: its timer and its stream are that strand's.
    asio::dispatch(end->stream->executor(), [self, joining, side, end = *end] {
      end.deadline->cancel();
      net::write_one_message(end.stream, wire::LinkWelcome{.proof = end.welcome_proof},
                             [self, joining, side](Status st) { self->welcomed(joining, side, st); });
    });
  }
}

void RelayService::welcomed(const std::shared_ptr<Joining>& joining, int side, const Status& st) {
  std::unique_lock lock(joining->mu);
  if (!st.ok() || joining->failed) {
    joining->failed = true;
    for (auto& s : joining->streams) asio::dispatch(s->executor(), [s] { s->close(); });
    return;
  }
  joining->sockets[side] = joining->streams[side]->release_socket();
  if (++joining->written < 2) return;
  auto a = std::move(*joining->sockets[0]), b = std::move(*joining->sockets[1]);
  lock.unlock();
  ++lanes_;
  std::weak_ptr<RelayService> weak = weak_from_this();
  auto splice = net::RelaySplice::start(std::move(a), std::move(b), [weak](net::SpliceCounts counts) {
    if (auto s = weak.lock()) {
      --s->lanes_;
      s->bytes_ += counts.a_to_b + counts.b_to_a;
    }
  });
  std::lock_guard service_lock(mu_);
  if (stopped_) return splice->stop();
  std::erase_if(splices_, [](const auto& w) { return w.expired(); });
  splices_.push_back(splice);
}

RelayService::Counts RelayService::counts() {
  Counts counts{lanes_.load(), bytes_.load()};
  std::lock_guard lock(mu_);
  for (const auto& weak : splices_)
    if (auto splice = weak.lock(); splice && !splice->ended()) {
      const net::SpliceCounts live = splice->counts();
      counts.bytes += live.a_to_b + live.b_to_a;
    }
  return counts;
}

void RelayService::stop() {
  std::vector<std::shared_ptr<net::TcpStream>> waiting;
  std::vector<std::weak_ptr<net::RelaySplice>> splices;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& [key, w] : waiting_)
      for (auto& end : w.ends)
        if (end.stream) waiting.push_back(end.stream);
    waiting_.clear();
    waiting_ends_ = 0;
    splices.swap(splices_);
  }
  listener_->stop();
  for (auto& s : waiting) asio::dispatch(s->executor(), [s] { s->close(); });
  for (auto& w : splices)
    if (auto splice = w.lock()) splice->stop();
}

}  // namespace ferry::peer
