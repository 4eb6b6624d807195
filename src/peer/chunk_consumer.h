// What a lane needs from the collective that owns a chunk. The all-reduce
// engine implements it; lanes know nothing of reductions.
#pragma once

#include <cstddef>
#include <cstdint>
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
  // The payload is in place. Runs on the lane's strand; may queue sends.
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

}  // namespace ferry::peer
