// How many connections (lanes) a ring link uses, adapted from what the link
// delivers. A single TCP connection carries at most its congestion window per
// round trip, and loss keeps that window small (cubic cuts it by 30 % per
// loss event): on a long, lossy path, k connections carry nearly k times one.
// On a short or clean path one window already covers it, and more lanes only
// cost threads and wakeups.
//
// The rule, a hill climb on the goodput of committed collectives (the rate a
// user gets, the same on every link of a ring, so the ring's links move
// together rather than each chasing the others' noise):
//  - a window is the all-reduces committed over the link until their
//    transfers add up to kWindow seconds (and kWindowRtts round trips: a
//    shorter one measures latency, not rate); its goodput is their bytes over
//    their transfer time;
//  - the count doubles (up to the cap) when the path is worth it, i.e. long
//    (kProbeRtt) or lossy (retransmissions in the window), and not full: its
//    smoothed RTT is within kQueueShare of its minimum (a full bottleneck
//    queues, and more lanes would only add loss);
//  - a long link (kProbeRtt) where the kernel lets this process use bbr
//    starts on it (path_rtt()): cubic reads random loss as congestion, bbr
//    paces to the path's measured bandwidth. A link that did not start on it
//    (its RTT unknown at the start) tries it before its first doubling when
//    the path is long and lossy (the lanes switch on the fly), judged like a
//    doubling (kept unless it costs 5 %);
//  - the window after a doubling is compared with the one before: at least
//    kGain more keeps it and may double again; about the same (within kGain
//    either way) keeps it and holds, because in a ring a link that doubles
//    while another link is as slow cannot raise the goodput, so "no gain"
//    does not mean "no use"; less goes back to the previous count (fewer
//    lanes), which the link then holds;
//  - a held link measures afresh and probes again after kReprobe seconds,
//    twice as long after each probe that did not gain, up to kReprobeMax
//    (loss and competing traffic change over a run).
// Measured on the emulated WAN (rtt=50ms, loss=0.1%, 200 Mbit/s, 3 peers,
// 64 MiB): 4 lanes carry 17 % of the link and 32 lanes 82 %, each doubling
// nearly doubling the rate until the link fills; at 16 lanes the RTT had
// risen 13 % over its minimum, and a full link doubles it (the emulator's
// one-BDP queue). Windows of the link's own TCP counters swung 2x between
// seconds (the ring's other links set its pace): hence collectives' goodput.
// New lanes start above their loss-limited rate (slow start overshoots, then
// cubic takes seconds to come down), so a first climb can stop a doubling
// early (16 lanes held at 61 % where 32 give 80 %): a held link measures
// afresh after kReprobe, by when its lanes have settled. At rtt=100ms,
// loss=0.05% even 64 cubic lanes carry only 60 % of the link (each loss
// stalls its lane's in-order stream for a round trip), 4 bbr lanes 81 %:
// hence the congestion-control step. Undoing every
// doubling that gained under 5 % left one link of three at 32 lanes and two
// at 16, each later probe alone: the ring stayed at 63 %.
//
// Pure: fed with the link's figures, returns the count it wants. Not thread-safe.
#pragma once

#include <cstdint>

namespace ferry::peer {

class LaneTuner {
 public:
  static constexpr double kWindow = 1.0;        // s of transfers
  static constexpr double kWindowRtts = 20;     // ... and at least this many round trips
  static constexpr uint32_t kProbeRtt = 5000;   // µs: below this (a LAN), with no loss, one window covers the path
  static constexpr double kQueueShare = 0.25;   // RTT above its minimum by this share: the path is full
  static constexpr double kGain = 1.05;         // 5 % more: a gain; 5 % less: a loss
  static constexpr double kReprobe = 20;        // s before a held link probes again
  static constexpr double kReprobeMax = 600;

  // One committed collective's part on the link, and the link's TCP figures after it.
  struct Transfer {
    uint64_t bytes = 0;
    double seconds = 0;         // its transfer time
    double now_s = 0;           // a steady clock
    uint64_t retransmits = 0;   // the lanes' retransmitted segments so far
    uint32_t rtt_us = 0;        // mean smoothed RTT of the lanes
    uint32_t min_rtt_us = 0;    // the lanes' smallest RTT seen (0: unknown)
    uint32_t lanes_up = 0;      // lanes open (the wanted count may not be up yet)
  };

  // `initial`: the lanes the link starts with (also the floor); `cap`: the
  // most it may use; `bbr_allowed`: its lanes may switch to bbr.
  LaneTuner(uint32_t initial, uint32_t cap, bool bbr_allowed = false);

  // Feeds one transfer; returns the lanes wanted now (dial up to it; use min(wanted, lanes_up)).
  uint32_t observe(const Transfer& transfer);
  uint32_t wanted() const { return wanted_; }
  // Whether the lanes should run bbr (else the congestion control they were made with).
  bool bbr() const { return bbr_; }
  // The path's round trip as the lanes' handshakes measured it, before the
  // first collective. A long path (kProbeRtt or more) starts on bbr where
  // allowed, and the climb goes on from there: on cubic its first collective
  // ran at a fifth of the second's (3 peers, rtt=230ms, loss=0.1 %, 64 MiB:
  // 50 s, then 8.9 s once the first window had switched it), and a single
  // collective may be all a ring ever runs before it changes.
  void path_rtt(uint32_t rtt_us);
  // No more lanes can be had (a dial failed): the count stays at most `lanes`.
  void limit(uint32_t lanes);
  // Starts where the last links to the same peer settled (a rebuilt ring):
  // `lanes` and bbr, held until a reprobe, rather than climbing again from the start.
  void resume(uint32_t lanes, bool bbr, double now_s);

  // What the last complete window measured, and how many were (for logs and tests).
  double last_rate() const { return last_rate_; }
  uint64_t windows() const { return windows_; }

 private:
  enum class Phase {
    base,   // measuring the current count, the reference for a probe
    probe,  // measuring a doubling (or the switch to bbr)
    hold,   // settled until its reprobe time
  };
  void change_to(uint32_t lanes, Phase next, double now_s);
  // Doubles when the path is worth it; else holds.
  void probe_or_hold(const Transfer& t, bool lossy);

  uint32_t floor_, cap_;
  uint32_t wanted_;
  bool bbr_allowed_;
  bool bbr_ = false;
  bool probing_bbr_ = false;  // the probe under way is the switch, not a doubling
  Phase phase_ = Phase::base;
  uint64_t window_bytes_ = 0;
  double window_s_ = 0;
  uint64_t window_retransmits_ = 0;  // the counter when the window began
  uint32_t best_lanes_ = 0;
  double best_rate_ = 0;
  double held_since_s_ = 0;
  double reprobe_after_ = kReprobe;
  double last_rate_ = 0;
  uint64_t windows_ = 0;
};

}  // namespace ferry::peer
