// Which collective an incoming chunk belongs to, for one ring epoch.
//
// A chunk may arrive before this peer has heard the master's go for its
// collective (the go reaches peers at slightly different times). Such a lane
// parks until the collective starts. A chunk for a collective this peer never
// issued is a protocol violation: every peer issues a collective before the
// master lets anyone send data for it.
//
// Threading: all calls are thread-safe (one mutex; lookups are per chunk).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"
#include "peer/chunk_consumer.h"

namespace ferry::peer {

class OpDirectory {
 public:
  using Resume = std::function<void()>;

  void add(uint32_t seq, std::weak_ptr<ChunkConsumer> consumer);
  // Chunks for seq may now be consumed; resumes lanes parked on it.
  void start(uint32_t seq);
  void remove(uint32_t seq);

  struct Lookup {
    std::shared_ptr<ChunkConsumer> consumer;  // set: go ahead
    bool parked = false;                      // set: `resume` will be called once seq starts
    Status error;                             // otherwise
  };
  Lookup find(uint32_t seq, Resume resume);
  // Every live collective (to tell them their links failed).
  std::vector<std::shared_ptr<ChunkConsumer>> consumers();

 private:
  struct Entry {
    std::weak_ptr<ChunkConsumer> consumer;
    bool started = false;
    std::vector<Resume> parked;
  };
  std::mutex mu_;
  std::map<uint32_t, Entry> entries_;  // guarded by mu_
};

}  // namespace ferry::peer
