// A shared state that is one tensor, the common case of the tools and tests
// (ferry-chaos-peer, ferry-test-peer, the integration tests): one call
// instead of a tensor, a state and their initialisers at every site.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/ferry.h"

namespace ferry::tooling {

// ferry_sync_shared_state of the tensor `name` (count elements of dtype at
// data) offered at `revision`, which afterwards holds the state's out value
// (the group's revision on success, unchanged on failure). `info` may be
// NULL; `changed` (may be NULL) receives the tensor's `changed` flag.
ferry_result sync_one_tensor(ferry_comm* comm, const char* name, void* data, std::size_t count, ferry_dtype dtype,
                             std::uint64_t& revision, ferry_sync_strategy strategy, ferry_sync_info* info,
                             int* changed = nullptr);

}  // namespace ferry::tooling
