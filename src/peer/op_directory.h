// Which collective an incoming chunk belongs to, for one ring epoch.
//
// A chunk may arrive before this peer has heard the master's go for its
// collective (the go reaches peers at slightly different times): its lane
// waits until the collective starts. A chunk for a collective this peer never
// issued is a protocol violation: every peer issues a collective before the
// master lets anyone send data for it.
//
// Threading: all calls are thread-safe (one mutex, one condition variable).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "peer/chunk_consumer.h"

namespace ferry::peer {

class OpDirectory {
 public:
  void add(uint32_t seq, std::weak_ptr<ChunkConsumer> consumer);
  // Chunks for seq may now be consumed; wakes lanes waiting for it.
  void start(uint32_t seq);
  void remove(uint32_t seq);
  // The links closed: every wait ends.
  void close();

  struct Lookup {
    std::shared_ptr<ChunkConsumer> consumer;  // set: go ahead
    Status error;                             // otherwise
  };
  // Blocks while seq is issued but not started (bounded: its go, an abort or
  // the links' close always comes, each under a deadline of its own).
  Lookup wait_started(uint32_t seq);
  // Every live collective (to tell them their links failed).
  std::vector<std::shared_ptr<ChunkConsumer>> consumers();

 private:
  struct Entry {
    std::weak_ptr<ChunkConsumer> consumer;
    bool started = false;
  };
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<uint32_t, Entry> entries_;  // guarded by mu_
  bool closed_ = false;                // guarded by mu_
};

}  // namespace ferry::peer
