// The emulated-WAN Launcher (--wan, --wan-topology): one network namespace per
// host from stress/wan, so master, peers and the Gloo ranks talk over a delayed,
// lossy, rate-capped network. Peer / Gloo rank i lives on host i, the master on host 0.
#pragma once

#include <memory>
#include "bench_args.h"
#include "placement.h"

namespace ferry::bench {

// The run's launcher: local, --wan (args.peers hosts) or --wan-topology (every host of
// the file; the peers use the first ones). Starting a WAN needs root: throws
// std::runtime_error with the reason ("wan: needs root ...").
std::unique_ptr<Launcher> make_launcher(const BenchArgs& args);

}  // namespace ferry::bench
