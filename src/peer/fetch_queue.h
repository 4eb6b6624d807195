// The chunks a shared-state sync still has to fetch, and from whom. Workers
// (one per connection to a holder) take chunks that holder can serve; a chunk
// whose transfer failed goes back for another holder; a holder that failed is
// never asked again. When some chunk has no live holder left, the fetch fails.
//
// Threading: all calls thread-safe (one mutex, one condition variable).
#pragma once

#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace ferry::peer {

struct FetchChunk {
  uint32_t tensor = 0;   // position in name order
  uint64_t offset = 0;   // bytes
  uint32_t length = 0;
  std::vector<uint64_t> holders;
};

class FetchQueue {
 public:
  explicit FetchQueue(std::vector<FetchChunk> chunks);

  // Up to `max` chunks `holder` can serve, each handed out once. While there
  // is none for it but the fetch is unfinished, waits: another holder may
  // fail and hand its chunks back. Empty: nothing more for this holder (all
  // done, the holder is dead, some chunk is stranded, or close() was called).
  std::vector<size_t> take(uint64_t holder, size_t max);
  void close();
  const FetchChunk& chunk(size_t id) const { return chunks_[id]; }
  size_t size() const { return chunks_.size(); }
  void done(size_t id);
  // `holder` failed: it is dropped, and these chunks (its unfinished ones) go back.
  void holder_failed(uint64_t holder, const std::vector<size_t>& unfinished);
  bool complete() const;
  // A chunk none of whose holders is alive, if any (the fetch cannot finish).
  bool stranded(std::string* which) const;

 private:
  enum class State : uint8_t { waiting, taken, done };
  bool stranded_locked(std::string* which) const;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool closed_ = false;             // guarded by mu_
  std::vector<FetchChunk> chunks_;  // fixed
  std::vector<State> state_;        // guarded by mu_
  std::set<uint64_t> dead_;         // guarded by mu_
  size_t remaining_;                // guarded by mu_
};

}  // namespace ferry::peer
