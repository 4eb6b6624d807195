// What a lane needs from the collective that owns a chunk. The all-reduce
// engine implements it; lanes know nothing of reductions.
//
// Threading: there are no strands here. Each lane calls from its own thread,
// one chunk at a time (an in lane: payload_*; an out lane: chunk_*), and the
// lanes of a link run at once, so one collective takes calls for different
// chunks concurrently. chunk_dropped also comes from a thread that queues onto
// closed links or closes them; links_failed from the thread that closes them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.h"
#include "wire/chunk_header.h"

namespace ferry::peer {

class ChunkConsumer {
 public:
  virtual ~ChunkConsumer() = default;

  // A header arrived for this collective. Validate it against the plan and
  // say where its payload goes: straight into the result, or into the lane's
  // `staging` buffer (resized here) when it must be combined first. An error
  // rejects the chunk, and the link with it. On success the collective counts
  // the read as busy until payload_received or payload_abandoned.
  virtual Status payload_destination(const wire::ChunkHeader& header, uint32_t lane,
                                     std::vector<uint8_t>& staging, uint8_t*& destination) = 0;
  // The payload is in place: at the destination given, or (a staged payload
  // on a shared-memory lane) read-only in the ring itself, valid only during
  // this call. May queue sends.
  virtual Status payload_received(const wire::ChunkHeader& header, uint32_t lane,
                                  const uint8_t* payload) = 0;
  // The read of an accepted payload failed (the link closed).
  virtual void payload_abandoned() = 0;
  // A chunk this collective queued has been handed to the transport.
  virtual void chunk_sent(size_t bytes) = 0;
  // A chunk this collective queued was dropped (the link closed): release it.
  virtual void chunk_dropped() = 0;
  // The links under this collective failed.
  virtual void links_failed(const Status& why) = 0;
};

// Which collective an incoming chunk goes to (OpRegistry::wait_started).
struct ChunkLookup {
  std::shared_ptr<ChunkConsumer> consumer;  // set: go ahead
  Status error;                             // otherwise
};

}  // namespace ferry::peer
