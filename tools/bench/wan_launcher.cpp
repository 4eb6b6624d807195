#include "wan_launcher.h"

#include <filesystem>

#include "topology.h"
#include "wan_network.h"

namespace ferry::bench {
namespace {

class WanLauncher final : public Launcher {
 public:
  // `peer_hosts`: the host index of peer (and Gloo rank) i; empty: host i.
  WanLauncher(wan::WanNetwork network, std::string description, std::vector<int> peer_hosts = {})
      : network_(std::move(network)), description_(std::move(description)), peer_hosts_(std::move(peer_hosts)) {}

  Placement place(ProcessRole role, int index) const override {
    const bool ranked = role == ProcessRole::ferry_peer || role == ProcessRole::gloo_rank;
    const int host_index = ranked && !peer_hosts_.empty() ? peer_hosts_.at(static_cast<size_t>(index)) : index;
    const auto& host = network_.hosts().at(static_cast<size_t>(host_index));
    std::vector<std::string> addresses{host.ip};
    if (!host.ip6.empty() && host.ip6 != host.ip) addresses.push_back(host.ip6);
    return {network_.exec_prefix(host_index), host.ip, "netns " + host.netns + " (" + host.ip + ")", host.name,
            addresses};
  }
  std::string describe() const override { return description_; }

 private:
  wan::WanNetwork network_;
  std::string description_;
  std::vector<int> peer_hosts_;
};

std::unique_ptr<Launcher> make_wan_launcher(const std::string& spec, int hosts) {
  auto config = wan::WanConfig::parse(spec + ",hosts=" + std::to_string(hosts));
  wan::WanNetwork network = wan::WanNetwork::start(config);
  std::string description = "emulated WAN " + network.config().to_string();
  return std::make_unique<WanLauncher>(std::move(network), std::move(description));
}

std::unique_ptr<Launcher> make_topology_launcher(const std::string& path, const std::vector<std::string>& names) {
  const wan::Topology topology = wan::Topology::load(path);
  // "emulated WAN topology one-slow-pair (stress/wan/topologies/one-slow-pair.json, 4 hosts, cc cubic)"
  const std::string description = "emulated WAN topology " + std::filesystem::path(path).stem().string() + " (" +
                                  topology.source + ", " + std::to_string(topology.size()) + " hosts, cc " +
                                  topology.base.cc + ")";
  std::vector<int> peer_hosts;
  for (const std::string& name : names)
    for (int h = 0; h < topology.size(); ++h)
      if (topology.hosts[static_cast<size_t>(h)].name == name) peer_hosts.push_back(h);
  return std::make_unique<WanLauncher>(wan::WanNetwork::start(topology), description, std::move(peer_hosts));
}

}  // namespace

std::unique_ptr<Launcher> make_launcher(const BenchArgs& args) {
  if (!args.wan_topology.empty()) return make_topology_launcher(args.wan_topology, args.hosts);
  if (!args.wan.empty()) return make_wan_launcher(args.wan, args.peers);
  return make_local_launcher();
}

}  // namespace ferry::bench
