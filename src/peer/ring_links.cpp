#include "peer/ring_links.h"

namespace ferry::peer {

RingLinks::RingLinks(uint64_t epoch, uint32_t lanes) : epoch_(epoch), lanes_(lanes) {}

RingLinks::~RingLinks() {
  close(Status::failure(Errc::peer_lost, "links released"));
  join();  // a lane's own thread cannot join itself; its lane detaches it (see OutLane/InLane)
}

void RingLinks::start(std::vector<std::shared_ptr<net::Stream>> out, std::vector<std::shared_ptr<net::Stream>> in) {
  std::weak_ptr<RingLinks> weak = weak_from_this();
  auto on_error = [weak](const Status& why) {
    if (auto self = weak.lock()) self->close(why);
  };
  for (uint32_t lane = 0; lane < out.size(); ++lane) {
    out[lane]->enter_blocking_mode();
    out_.push_back(std::make_shared<OutLane>(std::move(out[lane]), lane, sends_, on_error));
  }
  for (uint32_t lane = 0; lane < in.size(); ++lane) {
    in[lane]->enter_blocking_mode();
    in_.push_back(std::make_shared<InLane>(std::move(in[lane]), lane, directory_, on_error));
  }
  for (auto& lane : out_) lane->start();
  for (auto& lane : in_) lane->start();
}

void RingLinks::send(const wire::ChunkHeader& header, const uint8_t* payload, std::shared_ptr<ChunkConsumer> owner,
                     bool checksum_pending) {
  sends_->push(SendQueue::Item{header, payload, std::move(owner), checksum_pending});
}

void RingLinks::close(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (!failure_.ok()) return;
    failure_ = why.ok() ? Status::failure(Errc::peer_lost, "links closed") : why;
  }
  sends_->close();
  for (auto& lane : out_) lane->close();
  for (auto& lane : in_) lane->close();
  directory_->close();
  for (auto& consumer : directory_->consumers()) consumer->links_failed(why);
}

void RingLinks::join() {
  for (auto& lane : out_) lane->join();
  for (auto& lane : in_) lane->join();
}

Status RingLinks::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace ferry::peer
