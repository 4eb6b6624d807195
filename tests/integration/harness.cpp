#include "harness.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ferry::test {
namespace {

std::atomic<Wire> g_wire{Wire::plain};

class TestCerts {
 public:
  TestCerts() {
    namespace fs = std::filesystem;
    dir_ = (fs::temp_directory_path() / ("ferry-test-certs-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    make(dir_, "master peer");
    make(dir_ + "/rogue", "rogue");
    fs::rename(dir_ + "/rogue/ca.pem", dir_ + "/rogue-ca.pem");
    for (const char* f : {"rogue.pem", "rogue.key"}) fs::rename(dir_ + "/rogue/" + f, dir_ + "/" + f);
    // A stranger that trusts our CA as well as its own.
    std::ofstream both(dir_ + "/both-ca.pem");
    both << std::ifstream(dir_ + "/ca.pem").rdbuf() << std::ifstream(dir_ + "/rogue-ca.pem").rdbuf();
  }
  ~TestCerts() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& path(const std::string& file) {
    std::lock_guard lock(mu_);
    auto [it, fresh] = paths_.try_emplace(file, dir_ + "/" + file);
    if (fresh && !std::filesystem::exists(it->second)) throw std::runtime_error("no test certificate file " + file);
    return it->second;
  }

 private:
  static void make(const std::string& dir, const std::string& names) {
    std::string command = "sh '" FERRY_SOURCE_DIR "/tools/gen-test-certs' '" + dir + "' " + names + " >/dev/null";
    if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
  }
  std::string dir_;
  std::mutex mu_;
  std::map<std::string, std::string> paths_;
};

}  // namespace

const char* wire_name(Wire wire) {
  switch (wire) {
    case Wire::plain: return "plain";
    case Wire::tls: return "tls";
    case Wire::shm: return "shm";
  }
  return "?";
}
Wire current_wire() { return g_wire.load(); }
WireScope::WireScope(Wire wire) : before_(g_wire.exchange(wire)) {}
WireScope::~WireScope() { g_wire.store(before_); }

const std::string& cert_path(const std::string& file) {
  static TestCerts certs;
  return certs.path(file);
}

void must(ferry_result r, const char* what) {
  if (r != FERRY_OK)
    throw CallFailed(r, std::string(what) + ": " + ferry_strerror(r) + ": " + ferry_last_error());
}

// "[::1]:PORT" for IPv6 literals, "HOST:PORT" otherwise.
static std::string host_port(const std::string& host, uint16_t port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

EmbeddedMaster::EmbeddedMaster(uint32_t link_max_age_ms, std::string host, uint16_t port, bool punch)
    : host_(std::move(host)) {
  ferry_master_params params;
  ferry_master_params_init(&params);
  const std::string listen = host_port(host_, port);
  params.listen_address = listen.c_str();
  if (link_max_age_ms) params.link_max_age_ms = link_max_age_ms;
  params.punch = punch ? 1 : 0;
  if (current_wire() == Wire::tls) {
    params.tls_cert_file = cert_path("master.pem").c_str();
    params.tls_key_file = cert_path("master.key").c_str();
    params.tls_ca_file = cert_path("ca.pem").c_str();
  }
  must(ferry_master_create_with(&params, &master_), "ferry_master_create_with");
  must(ferry_master_port(master_, &port_), "ferry_master_port");
  must(ferry_master_run(master_), "ferry_master_run");
}

EmbeddedMaster::~EmbeddedMaster() { ferry_master_destroy(master_); }

std::string EmbeddedMaster::address() const { return host_port(host_, port_); }

void EmbeddedMaster::stop() { must(ferry_master_stop(master_), "ferry_master_stop"); }
void EmbeddedMaster::stop_for_restart() { must(ferry_master_stop_for_restart(master_), "ferry_master_stop_for_restart"); }

ferry_comm* create_peer(const std::string& master, const PeerSettings& s) {
  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = master.c_str();
  params.peer_group = s.group;
  params.p2p_connections = s.connections;
  if (!s.listen_host.empty()) params.p2p_listen_host = s.listen_host.c_str();
  params.io_threads = s.io_threads;
  params.timeout_ms = s.timeout_ms;
  params.progress_timeout_ms = s.progress_timeout_ms;
  params.heartbeat_timeout_ms = s.heartbeat_timeout_ms;
  params.max_chunk_bytes = s.max_chunk_bytes;
  params.p2p_port_min = params.p2p_port_max = s.port;
  params.advertised_port = s.advertised_port;
  params.master_reconnect_timeout_ms = s.master_reconnect_timeout_ms;
  params.dial_out_only = s.dial_out_only ? 1 : 0;
  params.shared_memory = s.shared_memory >= 0 ? static_cast<uint32_t>(s.shared_memory) : current_wire() == Wire::shm;
  if (current_wire() == Wire::tls) {
    params.tls_cert_file = cert_path(s.tls_cert).c_str();
    params.tls_key_file = cert_path(s.tls_key).c_str();
    params.tls_ca_file = cert_path(s.tls_ca).c_str();
  }
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
  wait_for_group(comm, target);
}

void wait_for_group(ferry_comm* comm, int64_t target, std::chrono::milliseconds deadline) {
  const auto give_up = std::chrono::steady_clock::now() + deadline;
  while (attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) < target) {
    if (std::chrono::steady_clock::now() >= give_up)
      throw std::runtime_error("wait_for_group: the group has " +
                               std::to_string(attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE)) + " of " +
                               std::to_string(target) + " peers after " + std::to_string(deadline.count()) + " ms");
    must(ferry_update_topology(comm), "ferry_update_topology");
    // Everyone saw the same topology_done, so everyone leaves this loop together.
    if (attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) < target) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

ferry_allreduce_desc allreduce_desc(ferry_dtype dtype, ferry_reduce_op op, ferry_quant quant, uint64_t tag) {
  ferry_allreduce_desc d;
  ferry_allreduce_desc_init(&d);
  d.dtype = dtype;
  d.op = op;
  d.quant = quant;
  d.tag = tag;
  return d;
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
