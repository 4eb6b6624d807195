// ferry_master_*: argument checks and translation only; master/ does the work.
#include <memory>
#include <mutex>

#include "capi/api_guard.h"
#include "capi/tls_params.h"
#include "core/run_secret.h"
#include "master/master_server.h"
#include "net/endpoint.h"

struct ferry_master {
  std::mutex mu;  // serializes run/stop/destroy
  std::unique_ptr<ferry::master::MasterServer> server;
};

using ferry::Errc;
using ferry::Error;
using ferry::capi::guarded;
using ferry::capi::require;

namespace {

using Farewell = ferry::master::MasterServer::Farewell;

ferry_result stop_master(ferry_master* master, Farewell farewell, const char* reason) {
  return guarded([&] {
    require(master, "master");
    std::lock_guard lock(master->mu);
    master->server->stop(farewell, reason);
  });
}

}  // namespace

extern "C" {

static void master_params_defaults(ferry_master_params* params) {
  if (!params) return;
  *params = ferry_master_params{};
  params->struct_size = sizeof(ferry_master_params);
  params->listen_address = "[::]:48148";
  params->peer_timeout_ms = 10000;
  params->link_max_age_ms = 600000;
  params->punch = 1;
}

void ferry_master_params_init_sized(ferry_master_params* params, uint32_t struct_size) {
  ferry::capi::init_versioned(params, struct_size, master_params_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_master_params_init)(ferry_master_params* params) {
  ferry_master_params_init_sized(params, ferry::capi::kSizeIn040<ferry_master_params>);
}

ferry_result ferry_master_create_with(const ferry_master_params* params, ferry_master** out) {
  return guarded([&] {
    require(out, "out");
    *out = nullptr;
    auto p = ferry::capi::read_versioned(params, master_params_defaults, "params");
    require(p.listen_address, "params->listen_address");
    std::string error;
    auto endpoint = ferry::net::parse_endpoint(p.listen_address, /*allow_port_zero=*/true, &error);
    if (!endpoint) throw Error(Errc::invalid_argument, error);
    if (p.peer_timeout_ms < 100 || p.peer_timeout_ms > 3'600'000)
      throw Error(Errc::invalid_argument, "peer_timeout_ms must be 100..3600000");
    ferry::master::MasterServerOptions options;
    options.listen_host = endpoint->host;
    options.listen_port = endpoint->port;
    options.limits.default_heartbeat_timeout_ms = p.peer_timeout_ms;
    if (p.link_max_age_ms < 1000 || p.link_max_age_ms > 86'400'000)
      throw Error(Errc::invalid_argument, "link_max_age_ms must be 1000..86400000");
    options.limits.link_max_age_ms = p.link_max_age_ms;
    if (p.punch > 1) throw Error(Errc::invalid_argument, "punch must be 0 or 1");
    options.limits.punch = p.punch != 0;
    options.secret = ferry::load_run_secret(p.secret_file);
    options.transport = ferry::capi::tls_transport_from(p.tls_cert_file, p.tls_key_file, p.tls_ca_file,
                                                        /*ca_required=*/false);
    if (p.http_address) {
      if (!*p.http_address) throw Error(Errc::invalid_argument, "http_address is empty (NULL: no HTTP endpoint)");
      options.http_address = p.http_address;
    }
    auto master = std::make_unique<ferry_master>();
    master->server = std::make_unique<ferry::master::MasterServer>(options);
    *out = master.release();
  });
}

ferry_result ferry_master_create(const char* listen_address, ferry_master** out) {
  ferry_master_params params;
  ferry_master_params_init(&params);
  params.listen_address = listen_address;
  if (!listen_address) return ferry::capi::fail(Errc::invalid_argument, "listen_address is NULL");
  return ferry_master_create_with(&params, out);
}

ferry_result ferry_master_run(ferry_master* master) {
  return guarded([&] {
    require(master, "master");
    std::lock_guard lock(master->mu);
    master->server->start();
  });
}

ferry_result ferry_master_port(const ferry_master* master, uint16_t* port) {
  return guarded([&] {
    require(master, "master");
    require(port, "port");
    *port = master->server->port();
  });
}

ferry_result ferry_master_http_port(const ferry_master* master, uint16_t* port) {
  return guarded([&] {
    require(master, "master");
    require(port, "port");
    *port = master->server->http_port();
    if (*port == 0) throw Error(Errc::invalid_usage, "this master has no HTTP endpoint (ferry_master_params.http_address)");
  });
}

ferry_result ferry_master_stop(ferry_master* master) {
  return stop_master(master, Farewell::going_away,
                     "stopped by its program (Python: Master.stop(); C: ferry_master_stop)");
}

ferry_result ferry_master_stop_for_restart(ferry_master* master) {
  return stop_master(master, Farewell::restart,
                     "stopped for a restart by its program (Python: Master.stop(restart=True); C: "
                     "ferry_master_stop_for_restart)");
}

void ferry_master_destroy(ferry_master* master) {
  if (!master) return;
  // Not through ferry_master_stop: a void cleanup call must leave the thread's last error as it was.
  try {
    std::lock_guard lock(master->mu);
    master->server->stop(Farewell::going_away,
                         "stopped by its program (Python: Master.close(); C: ferry_master_destroy)");
  } catch (...) {
  }
  delete master;
}

}  // extern "C"
