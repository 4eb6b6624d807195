// The process's file-descriptor budget. Every connection, lane eventfd and
// shared-memory ring costs descriptors, and distros still ship a soft limit
// of 1024 under a hard limit of 500k+: a busy master or a peer with many
// links would run out long before the machine does, so we raise the soft
// limit to the hard one once, at start.
#pragma once

#include <cstdint>

namespace ferry::net {

struct FdLimit {
  uint64_t soft = 0;    // after raising
  uint64_t hard = 0;
  uint64_t before = 0;  // the soft limit we found
  bool raised() const { return soft > before; }
};

// Raises the soft RLIMIT_NOFILE to the hard limit, once per process (later
// calls return the first result without touching the limit again). Never
// throws; when the limit cannot be read or raised it reports what it found.
// Thread-safe.
FdLimit raise_fd_limit();

}  // namespace ferry::net
