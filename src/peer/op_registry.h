// The one table of a communicator's collectives in flight, and the one owner
// of their life cycle: an operation is registered when its number is taken
// (issue), marked started when the master lets it move data (op_started), and
// removed when it finishes (op_finished). Both the master's messages
// (find) and the lanes' incoming chunks (wait_started) look it up here.
//
// Numbering: every peer of a ring numbers its collectives 0, 1, 2, ... in the
// order it issues them, restarting at 0 whenever the ring is installed or
// renewed (restart). The number is taken in the same step that registers
// the operation, under one lock, so a refused call never moves it.
//
// A chunk may arrive before this peer has heard the master's go for its
// collective (the go reaches peers at slightly different times): its lane
// waits until the collective starts. A chunk for a collective this peer never
// issued, or one that runs on other links, is a protocol violation.
//
// Begin before end: the issuing thread sends an operation's begin to the master
// after issue() returns (no lock across a send), and a link failure can fail the
// operation in between. An end the master gets first names a collective it has
// never heard of, and it kicks the peer; so an end waits here until the issuer
// says the begin went out (release_end).
//
// Threading: every call from any thread; mu_ guards the table. No call into
// an operation is made with mu_ held (they call back: op_started, op_finished).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "peer/chunk_consumer.h"
#include "peer/collective_op.h"

namespace ferry::peer {

class RingLinks;

class OpRegistry final : public OpHost {
 public:
  // Where an operation's end goes (the master session).
  using SendEnd = std::function<void(const wire::CollectiveEnd&)>;
  explicit OpRegistry(SendEnd send_end);

  // A ring was installed or renewed: numbering restarts at 0 under `epoch`.
  // Only with nothing in flight (the topology vote refuses otherwise).
  void restart(uint64_t epoch);

  // Takes the next number and registers make(epoch, seq) in one step; an
  // exception from make leaves the numbering as it was. `links`: the ring
  // links whose lanes carry the operation's chunks (null: none do).
  template <class Op, class Make>
  std::shared_ptr<Op> issue(Make&& make, const RingLinks* links) {
    std::lock_guard lock(mu_);
    std::shared_ptr<Op> op = make(epoch_, next_seq_);
    Entry entry{op, nullptr, links, false};
    if constexpr (std::is_base_of_v<ChunkConsumer, Op>) entry.consumer = op;
    unbegun_.insert(next_seq_);
    entries_.emplace(next_seq_++, std::move(entry));
    return op;
  }

  // The issuer sent seq's begin to the master (or never will: the master is away);
  // its end may go now, and one that waited goes at once.
  void release_end(uint32_t seq);

  std::shared_ptr<CollectiveOp> find(uint64_t epoch, uint32_t seq) const;
  std::vector<std::shared_ptr<CollectiveOp>> in_flight() const;
  size_t size() const;
  // Waits until nothing is in flight or the deadline; true when empty.
  bool wait_empty(std::chrono::steady_clock::time_point deadline);

  // For a lane of `links`: blocks while seq is issued but not started (bounded:
  // its go, an abort or the links' close always comes, each under a deadline of
  // its own); `closed` is the links' flag, which links_closed() announces.
  ChunkLookup wait_started(uint32_t seq, const RingLinks* links, const std::atomic<bool>& closed);
  // `links` closed: its lanes stop waiting, and every collective on it hears why.
  void links_closed(const RingLinks* links, const Status& why);

  // OpHost
  void send_end(uint64_t epoch, uint32_t seq, const Status& status) override;
  void op_started(uint32_t seq) override;
  void op_finished(uint32_t seq) override;

  BufferPool* scratch_pool() override { return &scratch_; }

 private:
  struct Entry {
    std::shared_ptr<CollectiveOp> op;
    std::shared_ptr<ChunkConsumer> consumer;  // set for collectives whose chunks ride the ring links
    const RingLinks* links;                   // identity only: the op itself keeps its links alive
    bool started;
  };

  const SendEnd send_end_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  uint64_t epoch_ = 0;                  // guarded by mu_
  uint32_t next_seq_ = 0;               // guarded by mu_
  std::map<uint32_t, Entry> entries_;   // guarded by mu_
  std::set<uint32_t> unbegun_;          // guarded by mu_: issued, begin not yet sent
  std::map<uint32_t, wire::CollectiveEnd> held_ends_;  // guarded by mu_: ends waiting for their begin
  BufferPool scratch_;                  // thread-safe itself
};

}  // namespace ferry::peer
