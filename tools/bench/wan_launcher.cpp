#include "wan_launcher.h"

#include "wan_network.h"

namespace ferry::bench {
namespace {

class WanLauncher final : public Launcher {
 public:
  explicit WanLauncher(wan::WanNetwork network) : network_(std::move(network)) {}

  Placement place(ProcessRole, int host_index) const override {
    const auto& host = network_.hosts().at(static_cast<size_t>(host_index));
    return {network_.exec_prefix(host_index), host.ip, "netns " + host.netns + " (" + host.ip + ")"};
  }
  std::string describe() const override { return "emulated WAN " + network_.config().to_string(); }

 private:
  wan::WanNetwork network_;
};

}  // namespace

std::unique_ptr<Launcher> make_wan_launcher(const std::string& spec, int hosts) {
  auto config = wan::WanConfig::parse(spec + ",hosts=" + std::to_string(hosts));
  return std::make_unique<WanLauncher>(wan::WanNetwork::start(config));
}

}  // namespace ferry::bench
