// What a Communicator is made with (communicator.h), and what it makes of it
// before anything runs: the transport resolved, the p2p links' options, and
// the hello every dial of the master sends.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <asio/any_io_executor.hpp>

#include "core/run_secret.h"
#include "net/endpoint.h"
#include "net/listener.h"
#include "net/transport.h"
#include "peer/link_options.h"
#include "wire/messages.h"

namespace ferry::peer {

class OpRegistry;

struct CommConfig {
  net::Endpoint master;
  uint32_t peer_group = 0;
  uint32_t connections = 0;  // lanes per ring link; 0: adapted (lane_tuner.h), from kStartLanes
  std::string listen_host = "::";  // both families (net/listener.h)
  uint16_t port_min = 0, port_max = 0;
  std::string advertised_host;  // empty: listen_host when it is one address, else as the master sees us
  uint16_t advertised_port = 0;  // 0: the bound port
  std::chrono::milliseconds timeout{60'000};
  std::chrono::milliseconds progress_timeout{20'000};
  std::chrono::milliseconds heartbeat_timeout{10'000};
  std::chrono::milliseconds master_reconnect_timeout{300'000};  // 0: a lost master is the end
  std::chrono::milliseconds master_connect_timeout{60'000};     // connect dials a master not up yet this long; 0: once
  uint32_t io_threads = 2;
  size_t max_chunk_bytes = 256 << 10;  // measured: chunks that stay in L2 between copy, hash and reduce cost least CPU
  net::SocketTuning p2p_tuning;  // applied to every p2p socket, both directions
  bool shared_memory = true;     // ring lanes to a peer on this host go through shared memory (link_setup.h)
  bool dial_out_only = false;    // no p2p listener: this peer dials every link, probe and fetch it takes part in
  bool relay = true;             // relays ring lanes for others when the master asks (relay_service.h); never when dial_out_only
  std::shared_ptr<const RunSecret> secret;  // null: the run is not authenticated
  std::shared_ptr<net::Transport> transport;  // null: plain TCP
};

// The config with its transport resolved (never null: plain TCP when none was given).
CommConfig with_transport(CommConfig config);
// config's p2p settings, for every link this peer sets up.
LinkOptions link_options(const CommConfig& config, std::weak_ptr<OpRegistry> ops);

// The host neighbours are told to dial (hello.advertised_host; empty: the
// master's view, or none without a listener). Throws Error (invalid_argument) when that
// view would be an IPv6 address and the listener takes IPv4 only. May resolve the master's name.
std::string advertised_host(const CommConfig& config, const net::Listener* listener, asio::any_io_executor executor);
// The hello of every dial of the master, but its resume half (resume_record.h).
// `listener` null: a dial-out-only peer, which advertises no address.
wire::Hello peer_hello(const CommConfig& config, const net::Listener* listener, const LinkOptions& links,
                       const std::string& advertised);

}  // namespace ferry::peer
