#include "harness.h"

#include <thread>

namespace ferry::test {

void must(ferry_result r, const char* what) {
  if (r != FERRY_OK)
    throw CallFailed(r, std::string(what) + ": " + ferry_strerror(r) + ": " + ferry_last_error());
}

EmbeddedMaster::EmbeddedMaster() {
  must(ferry_master_create("127.0.0.1:0", &master_), "ferry_master_create");
  must(ferry_master_port(master_, &port_), "ferry_master_port");
  must(ferry_master_run(master_), "ferry_master_run");
}

EmbeddedMaster::~EmbeddedMaster() { ferry_master_destroy(master_); }

std::string EmbeddedMaster::address() const { return "127.0.0.1:" + std::to_string(port_); }

void EmbeddedMaster::stop() { must(ferry_master_stop(master_), "ferry_master_stop"); }

ferry_comm* create_peer(const std::string& master, const PeerSettings& s) {
  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = master.c_str();
  params.peer_group = s.group;
  params.p2p_connections = s.connections;
  params.p2p_listen_host = "127.0.0.1";
  params.io_threads = s.io_threads;
  params.timeout_ms = s.timeout_ms;
  params.progress_timeout_ms = s.progress_timeout_ms;
  params.heartbeat_timeout_ms = s.heartbeat_timeout_ms;
  params.max_chunk_bytes = s.max_chunk_bytes;
  ferry_comm* comm = nullptr;
  must(ferry_comm_create(&params, &comm), "ferry_comm_create");
  return comm;
}

int64_t attribute(ferry_comm* comm, ferry_attribute a) {
  int64_t value = -1;
  must(ferry_comm_get_attribute(comm, a, &value), "ferry_comm_get_attribute");
  return value;
}

void grow_group(ferry_comm* comm, int64_t target) {
  must(ferry_connect(comm), "ferry_connect");
  while (attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) < target) {
    must(ferry_update_topology(comm), "ferry_update_topology");
    // Everyone saw the same topology_done, so everyone leaves this loop together.
    if (attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) < target) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<std::string> run_peers(size_t peers, const std::function<void(size_t)>& body) {
  std::vector<std::string> results(peers);
  std::vector<std::thread> threads;
  for (size_t rank = 0; rank < peers; ++rank)
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (const std::exception& e) {
        results[rank] = e.what();
        if (results[rank].empty()) results[rank] = "failed";
      }
    });
  for (auto& t : threads) t.join();
  return results;
}

std::string failures(const std::vector<std::string>& results) {
  std::string out;
  for (size_t i = 0; i < results.size(); ++i)
    if (!results[i].empty()) out += "[peer " + std::to_string(i) + "] " + results[i] + "\n";
  return out;
}

}  // namespace ferry::test
