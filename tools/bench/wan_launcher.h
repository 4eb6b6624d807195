// The emulated-WAN Launcher (--wan): one network namespace per host from
// stress/wan, so master, peers and the Gloo ranks talk over a delayed, lossy,
// rate-capped network. Peer / Gloo rank i lives on host i, the master on host 0.
#pragma once

#include <memory>
#include <string>

#include "placement.h"

namespace ferry::bench {

// Starts the network (needs root). Throws std::runtime_error with the reason.
std::unique_ptr<Launcher> make_wan_launcher(const std::string& spec, int hosts);

}  // namespace ferry::bench
