// A ferry-master process (FERRY_MASTER_BIN) for the tests that kill it, or
// read its log: started on 127.0.0.1 and waited for until it listens.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "child_process.h"  // tools/common

namespace ferry::test {

struct MasterProcess {
  tooling::Child* child = nullptr;
  std::string address;  // "127.0.0.1:PORT"
  uint16_t port = 0;
};

// Starts ferry-master on 127.0.0.1:port (0: any free one) logging at
// `log_level` (to its stderr) and waits until it listens.
inline MasterProcess start_master(tooling::ChildSet& children, uint16_t port = 0,
                                  const std::string& log_level = "warn") {
  tooling::Child& m = children.spawn(
      "ferry-master", {FERRY_MASTER_BIN, "--listen", "127.0.0.1:" + std::to_string(port), "--log-level", log_level});
  REQUIRE(children.pump_until([&] { return !m.running() || m.out().find('\n') != std::string::npos; },
                              tooling::Clock::now() + std::chrono::seconds(15)));
  const std::string line = m.out().substr(0, m.out().find('\n'));
  REQUIRE(line.rfind("ferry-master listening on ", 0) == 0);
  const auto listening = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
  return {&m, "127.0.0.1:" + std::to_string(listening), listening};
}

}  // namespace ferry::test
