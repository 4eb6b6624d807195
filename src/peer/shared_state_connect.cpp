// How a shared-state sync's connections come up (shared_state_sync.h): the
// fetcher's to each holder, opened by whichever end can (wire::FetchDial), and
// those other peers open to this one, as fetcher or as holder.
#include <pthread.h>

#include <algorithm>

#include "core/log.h"
#include "peer/shared_state_sync.h"
#include "wire/fetch_frames.h"
#include "wire/frame.h"

namespace ferry::peer {

Status SharedStateSync::connect_holder(const wire::PeerAddress& holder, wire::FetchDial dial, uint32_t k,
                                       std::shared_ptr<net::Stream>& out) {
  const wire::FetchHello hello{
      .from_peer = self_id_, .to_peer = holder.peer_id, .epoch = epoch(), .seq = seq(), .dial = static_cast<uint8_t>(dial)};
  if (dial == wire::FetchDial::fetcher) return connector_.dial(holder, hello, out);
  if (dial == wire::FetchDial::both) return connector_.punch(holder, hello, k, /*holder=*/false, out);
  // The holder dials us: take one of the connections it opened (take_holders_connection).
  std::unique_lock lock(mu_);
  auto& waiting = opened_by_holder_[holder.peer_id];
  holder_opened_.wait_for(lock, connector_.holder_wait, [&] { return stopped_ || !waiting.empty(); });
  if (stopped_) return Status::failure(Errc::peer_lost, "the sync ended");
  if (waiting.empty()) {
    // Some connections of this holder came: it is alive, with fewer of them than asked for.
    if (holder_opened_count_[holder.peer_id] > 0) return Status::success();
    return Status::failure(Errc::timeout, "it opened no connection to this peer");
  }
  out = std::move(waiting.back());
  waiting.pop_back();
  return Status::success();
}

void SharedStateSync::serve(const wire::FetchHello& hello, const std::string& welcome_proof,
                            std::shared_ptr<net::Stream> stream) {
  Arrival arrival{hello, welcome_proof, std::move(stream)};
  {
    std::lock_guard lock(mu_);
    if (stopped_ || hello.acceptor() != self_id_) {
      arrival.stream->close();
      return;
    }
    if (!plan_) {
      // The other end heard its plan before we heard ours: wait for it (bounded by the sync's deadlines).
      early_arrivals_.push_back(std::move(arrival));
      return;
    }
  }
  arrived(std::move(arrival));
}

void SharedStateSync::arrived(Arrival arrival) {
  if (arrival.hello.holder_opened()) return take_holders_connection(std::move(arrival));
  start_serving(std::move(arrival));
}

namespace {

// Answers a hello this end accepted; false when the stream failed (and was aborted).
bool welcome(net::Stream& stream, bool ok, const std::string& refusal, const std::string& proof) {
  stream.enter_blocking_mode();
  auto bytes = wire::encode_message(wire::LinkWelcome{.code = ok ? 0u : static_cast<uint32_t>(Errc::auth),
                                                      .reason = ok ? "" : refusal,
                                                      .proof = ok ? proof : ""});
  std::array<asio::const_buffer, 1> buffers{asio::buffer(bytes)};
  if (!ok || stream.write_all_blocking(buffers)) {
    stream.abort();
    return false;
  }
  return true;
}

}  // namespace

void SharedStateSync::start_serving(Arrival fetcher) {
  const auto& allowed = plan_->serve_to;
  auto stream = fetcher.stream;
  // Only peers the master sent here may read these tensors (with a run secret, their identity is proven).
  bool ok = std::find(allowed.begin(), allowed.end(), fetcher.hello.from_peer) != allowed.end();
  if (!welcome(*stream, ok, "not in this sync's plan", fetcher.welcome_proof)) return;
  track(stream);
  spawn([this, stream] { serve_loop(stream); });
}

void SharedStateSync::take_holders_connection(Arrival holder) {
  const auto& plan = *plan_;
  bool ok = false;
  for (size_t h = 0; h < plan.addresses.size(); ++h)
    ok |= plan.addresses[h].peer_id == holder.hello.to_peer && plan.holder_dial(h) == wire::FetchDial::holder &&
          holder.hello.dial == static_cast<uint8_t>(wire::FetchDial::holder);
  if (!welcome(*holder.stream, ok, "not a holder that dials this peer in this sync's plan", holder.welcome_proof)) return;
  track(holder.stream);
  {
    std::lock_guard lock(mu_);
    ++holder_opened_count_[holder.hello.to_peer];
    opened_by_holder_[holder.hello.to_peer].push_back(holder.stream);
  }
  holder_opened_.notify_all();
}

void SharedStateSync::serve_opened(const wire::ServeDial& fetcher, uint32_t k) {
  pthread_setname_np(pthread_self(), "ferry-serve");
  const wire::FetchHello hello{.from_peer = fetcher.fetcher.peer_id, .to_peer = self_id_, .epoch = epoch(), .seq = seq(),
                               .dial = fetcher.dial};
  std::shared_ptr<net::Stream> stream;
  Status st = fetcher.dial == static_cast<uint8_t>(wire::FetchDial::both)
                  ? connector_.punch(fetcher.fetcher, hello, k, /*holder=*/true, stream)
                  : connector_.dial(fetcher.fetcher, hello, stream);
  // The fetcher sees the missing connection and fetches elsewhere (or over the ones that came).
  if (!st.ok()) return log().warn("shared state: cannot connect to fetcher {}: {}", fetcher.fetcher.peer_id, st.message);
  track(stream);
  serve_loop(stream);
}

}  // namespace ferry::peer
