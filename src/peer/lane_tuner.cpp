#include "peer/lane_tuner.h"

#include <algorithm>

namespace ferry::peer {

LaneTuner::LaneTuner(uint32_t initial, uint32_t cap, bool bbr_allowed)
    : floor_(std::max(initial, 1u)), cap_(std::max(cap, floor_)), wanted_(floor_), bbr_allowed_(bbr_allowed) {}

uint32_t LaneTuner::observe(const Transfer& t) {
  if (phase_ == Phase::hold) {
    if (t.now_s - held_since_s_ < reprobe_after_) return wanted_;
    phase_ = Phase::base;  // measure afresh: this transfer opens the new reference
    window_bytes_ = 0;
    window_s_ = 0;
    window_retransmits_ = t.retransmits;
    return wanted_;
  }
  // Ran while further lanes were still being dialled: not the count under test.
  if (t.lanes_up < wanted_) {
    window_bytes_ = 0;
    window_s_ = 0;
    window_retransmits_ = t.retransmits;
    return wanted_;
  }
  window_bytes_ += t.bytes;
  window_s_ += t.seconds;
  if (window_s_ < std::max(kWindow, kWindowRtts * t.rtt_us / 1e6)) return wanted_;
  double rate = static_cast<double>(window_bytes_) / window_s_;
  bool lossy = t.retransmits > window_retransmits_;
  window_bytes_ = 0;
  window_s_ = 0;
  window_retransmits_ = t.retransmits;
  last_rate_ = rate;
  ++windows_;
  if (phase_ == Phase::base) {
    best_lanes_ = wanted_;
    best_rate_ = rate;
    probe_or_hold(t, lossy);
  } else if (rate >= best_rate_ * kGain) {
    best_lanes_ = wanted_;
    best_rate_ = rate;
    reprobe_after_ = kReprobe;
    probe_or_hold(t, lossy);
  } else {
    reprobe_after_ = std::min(reprobe_after_ * 2, kReprobeMax);
    if (rate * kGain >= best_rate_) {  // about the same: keep it (another link may be as slow), climb no further
      best_lanes_ = wanted_;
      best_rate_ = rate;
      change_to(wanted_, Phase::hold, t.now_s);
    } else if (probing_bbr_) {
      bbr_ = false;  // the switch cost goodput: back to the lanes' own congestion control
      change_to(wanted_, Phase::hold, t.now_s);
    } else {
      change_to(best_lanes_, Phase::hold, t.now_s);  // the doubling cost goodput: back to fewer lanes
    }
  }
  if (phase_ != Phase::probe) probing_bbr_ = false;
  return wanted_;
}

void LaneTuner::probe_or_hold(const Transfer& t, bool lossy) {
  bool worth = lossy || t.rtt_us >= kProbeRtt;
  bool full = t.min_rtt_us > 0 && t.rtt_us > t.min_rtt_us * (1 + kQueueShare);
  if (lossy && t.rtt_us >= kProbeRtt && bbr_allowed_ && !bbr_ && !probing_bbr_) {
    bbr_ = probing_bbr_ = true;  // tried once per link: judged like a doubling
    bbr_allowed_ = false;
    return change_to(wanted_, Phase::probe, t.now_s);
  }
  probing_bbr_ = false;
  if (worth && !full && wanted_ < cap_) return change_to(std::min(wanted_ * 2, cap_), Phase::probe, t.now_s);
  change_to(wanted_, Phase::hold, t.now_s);
}

void LaneTuner::change_to(uint32_t lanes, Phase next, double now_s) {
  wanted_ = lanes;
  phase_ = next;
  if (next == Phase::hold) held_since_s_ = now_s;
}

void LaneTuner::resume(uint32_t lanes, bool bbr, double now_s) {
  wanted_ = std::clamp(lanes, floor_, cap_);
  if (bbr && bbr_allowed_) bbr_ = true;
  bbr_allowed_ = bbr_allowed_ && !bbr_;
  change_to(wanted_, Phase::hold, now_s);
}

void LaneTuner::path_rtt(uint32_t rtt_us) {
  if (rtt_us < kProbeRtt || !bbr_allowed_ || bbr_) return;
  bbr_ = true;
  bbr_allowed_ = false;  // nothing to switch to later: cubic is not tried against it
}

void LaneTuner::limit(uint32_t lanes) {
  cap_ = std::max(lanes, floor_);
  if (wanted_ > cap_) {
    wanted_ = cap_;
    phase_ = Phase::hold;  // held_since_s_ stays: the reprobe clock is not worth a clock read here
  }
}

}  // namespace ferry::peer
