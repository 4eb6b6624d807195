#include "placement.h"

namespace ferry::bench {

namespace {

class LocalLauncher final : public Launcher {
 public:
  Placement place(ProcessRole, int) const override { return {{}, "127.0.0.1", "127.0.0.1", "", {"127.0.0.1"}}; }
  std::string describe() const override { return "local (127.0.0.1)"; }
};

}  // namespace

std::unique_ptr<Launcher> make_local_launcher() { return std::make_unique<LocalLauncher>(); }

std::string host_port(const std::string& host, const std::string& port) {
  return host.find(':') == std::string::npos ? host + ":" + port : "[" + host + "]:" + port;
}

std::string reachable_host(const Placement& from, const Placement& to) {
  auto is_v6 = [](const std::string& address) { return address.find(':') != std::string::npos; };
  for (const std::string& theirs : to.addresses)
    for (const std::string& ours : from.addresses)
      if (is_v6(theirs) == is_v6(ours)) return theirs;
  return to.host;
}

}  // namespace ferry::bench
