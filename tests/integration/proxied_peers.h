// Peers' settings with each listener behind a route of the chaos proxy
// (stress/chaos/chaos_proxy.h) and on TCP, not shared memory: each peer
// advertises its route, so every ring link to it runs through the proxy,
// where a test can shape, reset or black-hole it.
#pragma once

#include <cstdint>
#include <vector>

#include "chaos_proxy.h"
#include "harness.h"
#include "stranger_crowd.h"  // free_loopback_port

namespace ferry::test {

struct ProxiedPeers {
  chaos::ChaosProxy proxy{1};
  std::vector<PeerSettings> settings;
  std::vector<uint16_t> routes;
  explicit ProxiedPeers(size_t peers) : settings(peers), routes(peers) {
    for (size_t i = 0; i < peers; ++i) {
      settings[i].shared_memory = 0;
      settings[i].port = free_loopback_port();
      routes[i] = proxy.add_route(settings[i].port);
      settings[i].advertised_port = routes[i];
    }
  }
};

}  // namespace ferry::test
