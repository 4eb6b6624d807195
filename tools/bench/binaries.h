// The programs ferry-bench starts: itself (peer role), ferry-master and
// ferry-gloo-bench, found next to this executable unless --bin-dir says where.
#pragma once

#include <string>

namespace ferry::bench {

struct Binaries {
  std::string self;    // this executable (/proc/self/exe), re-run as a peer
  std::string master;  // "" when not needed
  std::string gloo;    // "" when not needed
};

// Throws std::runtime_error naming every path tried when one that is needed is
// missing. Looks in bin_dir if given, else in this executable's directory (an
// install) and in the build tree's tools/master and tools/gloo_baseline.
Binaries find_binaries(const std::string& bin_dir, bool need_master, bool need_gloo);

}  // namespace ferry::bench
