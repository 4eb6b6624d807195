#include "peer/ring_links.h"

#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "peer/escaped_exception.h"

namespace ferry::peer {
namespace {

constexpr uint32_t kUnsentPerLane = 128 * 1024;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The smallest round trip the lanes' connections have seen (0: none known).
uint32_t path_rtt_us(const std::vector<std::shared_ptr<OutLane>>& lanes) {
  uint32_t rtt = 0;
  for (auto& lane : lanes)
    if (auto tcp = lane->sample().tcp) {
      uint32_t r = tcp->min_rtt_us ? tcp->min_rtt_us : tcp->rtt_us;
      if (r && (rtt == 0 || r < rtt)) rtt = r;
    }
  return rtt;
}

}  // namespace

RingLinks::RingLinks(uint64_t epoch, uint32_t lanes, std::weak_ptr<OpRegistry> ops, SharedMemoryLanes shared_memory,
                     LaneGrowth growth)
    : epoch_(epoch), lanes_(lanes), shared_memory_(shared_memory), ops_(std::move(ops)), growth_(std::move(growth)) {
  // Over shared memory there is no congestion window to multiply: the count stays.
  if (growth_.dial && growth_.cap > lanes_ && shared_memory_.out == 0 && lanes_ > 0) {
    tuner_.emplace(lanes_, growth_.cap, growth_.bbr_allowed);
    // The further lanes are dialled after the first collective, not now: the
    // next peer takes them only once it has committed this ring too.
    if (growth_.resume.lanes > lanes_ || growth_.resume.bbr)
      tuner_->resume(growth_.resume.lanes, growth_.resume.bbr, now_s());
  }
}

RingLinks::~RingLinks() {
  close(Status::failure(Errc::peer_lost, "links released"));
  join();  // a lane's own thread cannot join itself; its lane detaches it (see OutLane/InLane)
}

Status RingLinks::start(std::vector<std::shared_ptr<net::Stream>> out, std::vector<std::shared_ptr<net::Stream>> in) {
  try {
    start_lanes(std::move(out), std::move(in));
    if (tuner_) {  // on bbr (resumed, or a long path): the lanes switch now (further lanes wait for the first collective)
      std::lock_guard lock(tune_mu_);
      auto lanes = out_lanes();
      tuner_->path_rtt(path_rtt_us(lanes));
      apply_congestion(lanes);
    }
    return Status::success();
  } catch (...) {
    // Lanes already started stop with the rest; streams not yet in a lane close as they go.
    Status why = status_of_current_exception("cannot start the links of epoch " + std::to_string(epoch_));
    close(why);
    return why;
  }
}

std::shared_ptr<OutLane> RingLinks::make_out_lane(std::shared_ptr<net::Stream> stream, uint32_t lane) {
  std::weak_ptr<RingLinks> weak = weak_from_this();
  auto on_error = [weak](const Status& why) {
    if (auto self = weak.lock()) self->close(why);
  };
  stream->enter_blocking_mode();
  return std::make_shared<OutLane>(std::move(stream), lane, sends_, in_use_, on_error);
}

std::shared_ptr<InLane> RingLinks::make_in_lane(std::shared_ptr<net::Stream> stream, uint32_t lane) {
  std::weak_ptr<RingLinks> weak = weak_from_this();
  auto on_error = [weak](const Status& why) {
    if (auto self = weak.lock()) self->close(why);
  };
  // The lookup names these links by address only (see OpRegistry::Entry) and holds nothing of them.
  auto find_started = [ops = ops_, closed = closed_, self = static_cast<const RingLinks*>(this)](uint32_t seq) {
    auto registry = ops.lock();
    if (!registry) return ChunkLookup{nullptr, Status::failure(Errc::peer_lost, "the communicator is gone")};
    return registry->wait_started(seq, self, *closed);
  };
  stream->enter_blocking_mode();
  return std::make_shared<InLane>(std::move(stream), lane, find_started, on_error);
}

void RingLinks::start_lanes(std::vector<std::shared_ptr<net::Stream>> out, std::vector<std::shared_ptr<net::Stream>> in) {
  // Over shared memory more writers only add wakeups (no congestion window
  // to multiply; measured on 2 cores, 3 peers: 4 writers 20% slower than 1):
  // one lane writes, the others stay open, idle, so the far side keeps its readers.
  size_t writers = shared_memory_.out == out.size() ? std::min<size_t>(out.size(), 1) : out.size();
  std::vector<std::shared_ptr<OutLane>> out_lanes;
  std::vector<std::shared_ptr<InLane>> in_lanes;
  {
    std::lock_guard lock(mu_);
    for (size_t lane = writers; lane < out.size(); ++lane) standby_.push_back(std::move(out[lane]));
  }
  out.resize(writers);
  in_use_->store(static_cast<uint32_t>(writers));
  for (uint32_t lane = 0; lane < out.size(); ++lane) out_lanes.push_back(make_out_lane(std::move(out[lane]), lane));
  for (uint32_t lane = 0; lane < in.size(); ++lane) in_lanes.push_back(make_in_lane(std::move(in[lane]), lane));
  {
    std::lock_guard lock(mu_);
    out_ = out_lanes;
    in_ = in_lanes;
  }
  for (auto& lane : out_lanes) lane->start();
  for (auto& lane : in_lanes) lane->start();
}

std::vector<std::shared_ptr<OutLane>> RingLinks::out_lanes() const {
  std::lock_guard lock(mu_);
  return out_;
}

std::vector<std::shared_ptr<InLane>> RingLinks::in_lanes() const {
  std::lock_guard lock(mu_);
  return in_;
}

uint32_t RingLinks::lanes_in_use() const { return in_use_->load(); }

SettledLink RingLinks::settled() {
  if (!tuner_) return {};
  std::lock_guard lock(tune_mu_);
  return {tuner_->wanted(), tuner_->bbr()};
}

bool RingLinks::accepts_in_lane(uint32_t lane) const {
  std::lock_guard lock(mu_);
  return failure_.ok() && lane >= lanes_ && lane < wire::kMaxConnectionsPerLink &&
         std::none_of(in_.begin(), in_.end(), [&](const auto& l) { return l->lane() == lane; });
}

bool RingLinks::add_in_lane(uint32_t lane, std::shared_ptr<net::Stream> stream) {
  std::shared_ptr<InLane> in_lane;
  try {
    in_lane = make_in_lane(std::move(stream), lane);
    std::lock_guard lock(mu_);
    if (!failure_.ok() || lane < lanes_ || lane >= wire::kMaxConnectionsPerLink ||
        std::any_of(in_.begin(), in_.end(), [&](const auto& l) { return l->lane() == lane; }))
      return false;
    in_lane->start();  // under mu_: close() must not miss a lane it cannot see
    in_.push_back(in_lane);
  } catch (...) {
    close(status_of_current_exception("cannot add in-lane " + std::to_string(lane)));
    return false;
  }
  return true;
}

void RingLinks::note_transfer(uint64_t bytes_sent, double transfer_s) {
  transfers_.note(bytes_sent, transfer_s);
  if (!tuner_) return;
  std::lock_guard lock(tune_mu_);
  LaneTuner::Transfer t{bytes_sent, transfer_s, now_s()};
  uint64_t rtt_sum = 0, rtt_count = 0;
  auto lanes = out_lanes();
  for (auto& lane : lanes) {
    auto tcp = lane->sample().tcp;
    if (!tcp) continue;
    t.retransmits += tcp->total_retrans;
    if (tcp->rtt_us > 0) {
      rtt_sum += tcp->rtt_us;
      ++rtt_count;
    }
    if (tcp->min_rtt_us > 0 && (t.min_rtt_us == 0 || tcp->min_rtt_us < t.min_rtt_us)) t.min_rtt_us = tcp->min_rtt_us;
  }
  if (rtt_count > 0) t.rtt_us = static_cast<uint32_t>(rtt_sum / rtt_count);
  t.lanes_up = static_cast<uint32_t>(lanes.size());
  uint64_t windows = tuner_->windows();
  uint32_t before = std::min(tuner_->wanted(), t.lanes_up);
  uint32_t wanted = tuner_->observe(t);
  if (tuner_->windows() != windows) {
    log().debug("link of epoch {}: {:.1f} MB/s over {} lanes (rtt {} us, min {} us); wants {}", epoch_,
                tuner_->last_rate() / 1e6, before, t.rtt_us, t.min_rtt_us, wanted);
  }
  apply(wanted);
}

void RingLinks::apply(uint32_t wanted) {
  if (closed_->load()) return;
  auto lanes = out_lanes();
  uint32_t up = static_cast<uint32_t>(lanes.size());
  uint32_t in_use = std::min(wanted, up);
  if (in_use_->exchange(in_use) != in_use) {
    log().debug("link of epoch {}: {} lanes in use ({} open, tuner wants {})", epoch_, in_use, up, wanted);
    for (auto& lane : lanes) lane->wake();
  }
  // The lanes share one queue, and a lane takes its next chunk once its last
  // is in its socket: a socket buffer grown large (an old lane's) would
  // hoard chunks its window cannot send while new lanes idle. Measured with
  // 16 lanes at rtt=50ms, loss=0.1%: lanes 12..15 sent 0 to 9 MB where lanes
  // 0..3 sent 30 to 44. A growing link holds little unsent data per lane.
  if (wanted > lanes_ || tuner_->bbr())
    for (auto& lane : lanes) lane->limit_unsent(kUnsentPerLane);
  apply_congestion(lanes);
  std::weak_ptr<RingLinks> weak = weak_from_this();
  for (uint32_t lane = up + dialling_; lane < wanted; ++lane) {
    ++dialling_;
    growth_.dial(lane, [weak, lane](Status st, std::shared_ptr<net::Stream> stream) {
      if (auto self = weak.lock()) return self->out_lane_dialled(lane, st, std::move(stream));
      if (stream) stream->abort();
    });
  }
}

void RingLinks::apply_congestion(const std::vector<std::shared_ptr<OutLane>>& lanes) {
  if (tuner_->bbr() && own_congestion_.empty() && !lanes.empty()) own_congestion_ = lanes.front()->congestion_control();
  if (tuner_->bbr() || !own_congestion_.empty())
    for (auto& lane : lanes) lane->set_congestion_control(tuner_->bbr() ? "bbr" : own_congestion_);
}

void RingLinks::out_lane_dialled(uint32_t lane, Status st, std::shared_ptr<net::Stream> stream) {
  std::lock_guard tune_lock(tune_mu_);
  --dialling_;
  if (st.ok()) {
    try {
      auto out_lane = make_out_lane(std::move(stream), lane);
      std::lock_guard lock(mu_);
      if (!failure_.ok()) return;  // closed meanwhile: the stream goes with the lane
      out_lane->start();  // under mu_: close() must not miss a lane it cannot see
      out_.push_back(out_lane);
    } catch (...) {
      st = status_of_current_exception("cannot start out-lane " + std::to_string(lane));
    }
  }
  if (!st.ok()) {
    // The link works with what it has; it only stops growing.
    log().info("link of epoch {} stays at {} lanes: lane {}: {}", epoch_, out_lanes().size(), lane, st.message);
    if (stream) stream->abort();
    tuner_->limit(static_cast<uint32_t>(out_lanes().size()));
  }
  apply(tuner_->wanted());
}

void RingLinks::send(const wire::ChunkHeader& header, const uint8_t* payload, std::shared_ptr<ChunkConsumer> owner,
                     bool checksum_pending) {
  sends_->push(SendQueue::Item{header, payload, std::move(owner), checksum_pending});
}

std::optional<wire::LinkEntry> RingLinks::measure(uint64_t self, uint64_t next) {
  auto transfers = transfers_.summarize();
  if (!transfers.fresh) return std::nullopt;
  std::vector<LaneSample> lanes;
  for (auto& lane : out_lanes()) lanes.push_back(lane->sample());
  auto entry = link_entry(self, next, transfers, lanes);
  entry.connections = lanes_in_use();
  return entry;
}

void RingLinks::close(const Status& why) {
  std::vector<std::shared_ptr<OutLane>> out;
  std::vector<std::shared_ptr<InLane>> in;
  std::vector<std::shared_ptr<net::Stream>> standby;
  {
    std::lock_guard lock(mu_);
    if (!failure_.ok()) return;
    failure_ = why.ok() ? Status::failure(Errc::peer_lost, "links closed") : why;
    out = out_;
    in = in_;
    standby = standby_;
  }
  sends_->close();
  for (auto& lane : out) lane->close();
  for (auto& lane : in) lane->close();
  for (auto& stream : standby)
    if (stream) stream->abort();
  closed_->store(true);
  if (auto registry = ops_.lock()) registry->links_closed(this, why);
}

void RingLinks::join() {
  for (auto& lane : out_lanes()) lane->join();
  for (auto& lane : in_lanes()) lane->join();
  // Released here for the same reason the lanes release theirs (see InLane::join).
  std::lock_guard lock(mu_);
  for (auto& stream : standby_) stream.reset();
}

Status RingLinks::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace ferry::peer
