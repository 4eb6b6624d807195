#include "net/stranger_gate.h"

#include "core/log.h"
#include "net/remote_host.h"

namespace ferry::net {
namespace {

std::string source_key(const asio::ip::address& source) {
  asio::ip::address address = unmapped(source);
  if (address.is_v6()) {
    auto bytes = address.to_v6().to_bytes();
    std::fill(bytes.begin() + 8, bytes.end(), 0);
    return asio::ip::address_v6(bytes).to_string() + "/64";
  }
  return address.to_string();
}

}  // namespace

void StrangerGate::Pass::release() {
  std::shared_ptr<StrangerGate> gate;
  {
    std::lock_guard lock(mu_);
    gate = std::move(gate_);
  }
  if (gate) gate->leave(source_);
}

std::shared_ptr<StrangerGate> StrangerGate::create(std::string what, StrangerLimits limits, std::string held) {
  return std::shared_ptr<StrangerGate>(new StrangerGate(std::move(what), limits, std::move(held)));
}

std::shared_ptr<StrangerGate::Pass> StrangerGate::admit(const asio::ip::address& source) {
  std::string key = source_key(source);
  {
    std::lock_guard lock(mu_);
    uint32_t& from_source = by_source_[key];
    if (from_source < limits_.per_source && total_ < limits_.total) {
      ++from_source;
      ++total_;
      return std::shared_ptr<Pass>(new Pass(shared_from_this(), std::move(key)));
    }
    if (from_source == 0) by_source_.erase(key);
    ++refused_;
  }
  if (uint64_t events = refusal_log_.admit())
    log().warn("{}: refused {} connection(s) (last from {}): at most {} per source and {} in total may be {} at once",
               what_, events, key, limits_.per_source, limits_.total, held_);
  return nullptr;
}

void StrangerGate::leave(const std::string& source) {
  std::lock_guard lock(mu_);
  --total_;
  if (auto it = by_source_.find(source); it != by_source_.end() && --it->second == 0) by_source_.erase(it);
}

uint32_t StrangerGate::strangers() const {
  std::lock_guard lock(mu_);
  return total_;
}

uint64_t StrangerGate::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace ferry::net
