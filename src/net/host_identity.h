// Who shares this machine with whom, for choosing a ring link's transport:
// two peers whose keys match run on one kernel (boot id), see one network
// (network namespace: a peer in an emulated WAN's namespace must stay on
// TCP) and one /proc (mount namespace: a ring's sealed memfd is opened through
// /proc/<pid>/fd), so a shared-memory ring can join them.
#pragma once

#include <string>

namespace ferry::net {

// Computed once per process; empty when /proc cannot tell (then never equal).
const std::string& same_host_key();

}  // namespace ferry::net
