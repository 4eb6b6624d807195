#include "peer/ring_links.h"

namespace ferry::peer {

RingLinks::RingLinks(uint64_t epoch, uint32_t lanes) : epoch_(epoch), lanes_(lanes) {}

void RingLinks::start(std::vector<std::shared_ptr<net::Stream>> out, std::vector<std::shared_ptr<net::Stream>> in) {
  std::weak_ptr<RingLinks> weak = weak_from_this();
  auto on_error = [weak](const Status& why) {
    if (auto self = weak.lock()) self->close(why);
  };
  for (auto& stream : out) out_.push_back(std::make_shared<OutLane>(std::move(stream), on_error));
  for (uint32_t lane = 0; lane < in.size(); ++lane)
    in_.push_back(std::make_shared<InLane>(std::move(in[lane]), lane, directory_, on_error));
  for (auto& lane : out_) lane->start();
  for (auto& lane : in_) lane->start();
}

void RingLinks::close(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (!failure_.ok()) return;
    failure_ = why.ok() ? Status::failure(Errc::peer_lost, "links closed") : why;
  }
  for (auto& lane : out_) lane->close();
  for (auto& lane : in_) lane->close();
  for (auto& consumer : directory_->consumers()) consumer->links_failed(why);
}

Status RingLinks::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace ferry::peer
