// Running the iproute2 tools (ip, tc, modprobe) the network setup needs.
//
// posix_spawnp, never fork(): the library lives in multi-threaded callers. No shell is
// involved, so namespace names and specs are never word-split or interpreted.
#pragma once

#include <string>
#include <vector>

namespace ferry::wan {

struct CommandResult {
  int status = -1;     // exit code; 128+signal when killed; -1 when it could not start
  std::string output;  // stdout and stderr together
};

// Runs argv[0] (searched in PATH, then /usr/sbin and /sbin) to completion.
CommandResult run_command(const std::vector<std::string>& argv);

// Same, but throws std::runtime_error("<what>: <command>: <output>") on a non-zero exit.
std::string run_checked(const std::vector<std::string>& argv);

// "ip netns add x" for messages.
std::string join_command(const std::vector<std::string>& argv);

}  // namespace ferry::wan
