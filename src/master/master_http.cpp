#include "master/master_http.h"

#include "master/dashboard/dashboard_page.h"
#include "master/master_metrics.h"

namespace ferry::master {

MasterHttp::MasterHttp(const std::string& address)
    : server_(address, [this](std::string_view path) { return answer(path); }) {}

MasterHttp::~MasterHttp() { stop(); }

void MasterHttp::start() { server_.start(); }

void MasterHttp::stop() { server_.stop(); }

void MasterHttp::publish(std::shared_ptr<const RunSnapshot> snapshot) {
  std::lock_guard lock(mutex_);
  latest_ = std::move(snapshot);
}

net::HttpResponse MasterHttp::answer(std::string_view path) {
  if (path == "/" || path == "/index.html")
    return {200, "text/html; charset=utf-8", std::string(dashboard_html())};
  std::shared_ptr<const RunSnapshot> snapshot;
  {
    std::lock_guard lock(mutex_);
    snapshot = latest_;
  }
  if (path == "/metrics" || path == "/status") {
    if (!snapshot) return {503, "text/plain; charset=utf-8", "the master has not published its state yet\n"};
    if (path == "/metrics")
      return {200, "text/plain; version=0.0.4; charset=utf-8", metrics_text(snapshot->view, snapshot->stats)};
    return {200, "application/json", status_json(snapshot->view, snapshot->stats, snapshot->journal, snapshot->context)};
  }
  return {404, "text/plain; charset=utf-8", "not found: this master serves /, /status and /metrics\n"};
}

}  // namespace ferry::master
