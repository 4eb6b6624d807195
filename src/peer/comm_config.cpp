#include "peer/comm_config.h"

#include <algorithm>

#include "net/host_addresses.h"
#include "net/resolve.h"
#include "peer/link_setup.h"

namespace ferry::peer {

CommConfig with_transport(CommConfig config) {
  if (!config.transport) config.transport = net::make_tcp_transport();
  return config;
}

// Room for four chunks in flight per lane, so a reader borrowing one never
// stalls the writer; capped because every lane of every link has its own.
LinkOptions link_options(const CommConfig& config, std::weak_ptr<OpRegistry> ops) {
  size_t ring = std::clamp<size_t>(4 * (config.max_chunk_bytes + 64), size_t{1} << 20, size_t{16} << 20);
  // A pinned count (the user's p2p_connections) never grows: the cap is then the ring's own.
  uint32_t max_lanes = config.connections == 0 ? wire::kMaxConnectionsPerLink : 0;
  bool bbr = max_lanes > 0 && config.p2p_tuning.congestion_control.empty() &&
             net::check_congestion_control("bbr").ok();
  return {config.transport, config.p2p_tuning, config.secret, {config.shared_memory, ring},
          config.timeout,   std::move(ops),     max_lanes,  bbr};
}

std::string advertised_host(const CommConfig& config, const net::Listener* listener, asio::any_io_executor executor) {
  if (!listener) return {};  // nobody dials a dial-out-only peer
  if (!config.advertised_host.empty()) return config.advertised_host;
  const auto& bound = listener->address();
  if (!bound.is_unspecified()) return bound.to_string();  // the one address it takes
  // Else the master says where it saw us from: over IPv6, an address a v4-only listener cannot take.
  if (listener->takes_v6()) return {};
  auto master = net::resolve_one_address(executor, config.master.host);
  if (master.is_v6() && !master.to_v6().is_v4_mapped())
    throw Error(Errc::invalid_argument,
                "the p2p listener (" + bound.to_string() + ") takes IPv4 only, but the master (" +
                    config.master.to_string() +
                    ") is reached over IPv6, so neighbours would be told an IPv6 address; listen on \"::\" (the "
                    "default: both families) or set advertised_host");
  return {};
}

wire::Hello peer_hello(const CommConfig& config, const net::Listener* listener, const LinkOptions& links,
                       const std::string& advertised) {
  wire::Hello hello;
  hello.peer_group = config.peer_group;
  // A listener on "::" or 0.0.0.0 with no address chosen for it is offered at every
  // interface address too: the master passes on those of the family it did not see.
  if (listener && advertised.empty() && listener->address().is_unspecified())
    hello.other_hosts = net::interface_addresses(listener->takes_v4(), listener->takes_v6());
  if (hello.other_hosts.size() > wire::kMaxOtherHosts) hello.other_hosts.resize(wire::kMaxOtherHosts);
  hello.advertised_host = advertised;
  if (listener) hello.advertised_port = config.advertised_port ? config.advertised_port : listener->port();
  hello.dial_out_only = listener ? 0 : 1;
  hello.p2p_connections = config.connections ? config.connections : kStartLanes;
  hello.heartbeat_timeout_ms = static_cast<uint32_t>(config.heartbeat_timeout.count());
  hello.silent_link_ms = static_cast<uint32_t>(LinkSetup::silent_link_deadline(links).count());
  hello.nonce = random_nonce();
  return hello;
}

}  // namespace ferry::peer
