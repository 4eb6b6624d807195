// The master's read-only HTTP endpoint for the people watching a run:
// /metrics (Prometheus text: master_metrics.h), /status (JSON: status_json.h)
// and / (the dashboard page, which reads /status). Off unless asked for
// (MasterServerOptions::http_address).
//
// Why a snapshot: the master's thread publishes one (publish(), O(peers +
// links), twice a second) and the HTTP server's own thread formats every
// answer from the latest. A slow, flooding or malicious HTTP client then
// costs the HTTP thread only (net/http_server.h bounds its connections,
// buffers and deadlines): it never enters the state machine, so it cannot
// delay a vote or a commit. What it shows is at most a tick old.
// Never shown: the run secret, keys, tensor contents (none of them is in a snapshot).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "master/master_stats.h"
#include "master/run_journal.h"
#include "master/run_view.h"
#include "master/status_json.h"
#include "net/http_server.h"

namespace ferry::master {

struct RunSnapshot {
  RunView view;
  MasterStats stats;
  RunJournal journal;
  StatusContext context;
};

class MasterHttp {
 public:
  // Binds at once: throws Error(Errc::connect) when the port is taken,
  // Errc::invalid_argument for a malformed address (net/http_server.h).
  explicit MasterHttp(const std::string& address);
  ~MasterHttp();
  MasterHttp(const MasterHttp&) = delete;
  MasterHttp& operator=(const MasterHttp&) = delete;

  void start();
  void stop();  // idempotent, bounded
  uint16_t port() const { return server_.port(); }
  std::string url() const { return "http://" + server_.address() + "/"; }

  // Any thread (the master's): the snapshot later answers are formatted from.
  void publish(std::shared_ptr<const RunSnapshot> snapshot);

 private:
  net::HttpResponse answer(std::string_view path);

  std::mutex mutex_;
  std::shared_ptr<const RunSnapshot> latest_;  // guarded by mutex_
  net::HttpServer server_;
};

}  // namespace ferry::master
