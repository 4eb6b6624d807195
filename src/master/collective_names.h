// Collectives and their parameters in words, for the messages a mismatch or a
// late member gives every peer: a user reads "f32 vs f64", not "dtype 10".
#pragma once

#include <string>

#include "wire/messages.h"

namespace ferry::master {

// "all_reduce", "sync_shared_state", "barrier", "broadcast"; else "collective kind N".
std::string collective_kind_name(uint8_t kind);

// "all_reduce(count 8, f32, sum, tag 0, quant none)", "broadcast(64 bytes, root 0)",
// "barrier" or "sync_shared_state";
// a value no enum knows (a newer or broken peer) is shown as its number.
std::string describe_collective(const wire::CollectiveBegin& begin);

// The fields in which two begins differ, e.g. "dtype f32 vs f64, op sum vs avg".
std::string collective_differences(const wire::CollectiveBegin& a, const wire::CollectiveBegin& b);

}  // namespace ferry::master
