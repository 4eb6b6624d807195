// How a duration reads in a message: "250 ms". Every timeout's message states
// its bound this way, so a user can match it to the *_ms setting that set it.
#pragma once

#include <chrono>
#include <string>

namespace ferry {

// A coarser duration (seconds) converts implicitly; a finer one needs a
// duration_cast first, which says that it is rounded down.
inline std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

}  // namespace ferry
