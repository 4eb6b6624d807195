// What an exception caught at a thread's or a handler's edge means, as a
// Status every caller can be given. The library's own threads (io, lanes,
// shared-state transfers) must not die silently nor take the process down:
// each catches at its edge, turns the exception into a Status here, and fails
// what depended on it (a link set, a collective, the communicator).
//
// A resource the system refused (file descriptors, threads, memory) is
// Errc::system and says so; anything else is Errc::internal (a bug).
#pragma once

#include <string_view>

#include "core/error.h"

namespace ferry::peer {

// Call only inside a catch block. `what_failed` starts the message:
// "<what_failed>: cannot create an eventfd: Too many open files".
Status status_of_current_exception(std::string_view what_failed);

}  // namespace ferry::peer
