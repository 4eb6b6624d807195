// The master on the network: one listener, one FrameConnection per peer, and
// the MasterState that decides everything. Runs on a single thread of its
// own, so the state machine is never entered concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "master/master_http.h"
#include "master/master_state.h"
#include "net/frame_connection.h"
#include "net/listener.h"
#include "net/stranger_gate.h"
#include "net/transport.h"

namespace ferry::master {

struct MasterServerOptions {
  std::string listen_host = "::";  // both families (net/listener.h)
  uint16_t listen_port = 48148;
  // The server dials each newcomer's advertised address before admitting it
  // (MasterLimits::reachability_check_ms): at most 2 s more for a peer nobody can dial.
  MasterLimits limits = MasterLimits{.reachability_check_ms = 2000};
  // A connection must say hello within this time, or it is closed.
  std::chrono::milliseconds hello_timeout{10'000};
  std::shared_ptr<net::Transport> transport;  // null: plain TCP
  std::optional<RunSecret> secret;            // peers must prove it (core/run_secret.h)
  // Connections not yet welcomed (net/stranger_gate.h); unset: sized by the
  // open-file limit, which the server raises to its hard limit first.
  std::optional<net::StrangerLimits> strangers;
  // Called once, on the serving thread, if that thread cannot go on (an
  // exception escaped a handler). By then every connection and the listener
  // are closed: peers see the master lost at once rather than a deaf master.
  std::function<void(const std::string& reason)> on_failure;
  // "HOST:PORT" of the read-only HTTP endpoint for people watching the run
  // (master_http.h: /metrics, /status, the dashboard); a port alone binds to
  // loopback. Empty (default): none.
  std::string http_address;
};

class MasterServer {
 public:
  // Binds the listener. Throws Error(Errc::connect) when the port is taken.
  explicit MasterServer(MasterServerOptions options);
  ~MasterServer();
  MasterServer(const MasterServer&) = delete;
  MasterServer& operator=(const MasterServer&) = delete;

  uint16_t port() const { return listener_->port(); }
  // The HTTP endpoint's port and the dashboard's URL; 0 and "" without one.
  uint16_t http_port() const { return http_ ? http_->port() : 0; }
  std::string http_url() const { return http_ ? http_->url() : std::string(); }
  // Starts the serving thread. Throws Error(Errc::invalid_usage) if called twice.
  void start();
  // How a stop ends the run for the peers.
  enum class Farewell {
    // Each connection gets a going_away (wire/messages.h) before it closes: the peers
    // fail at once with master_lost, as the master will not come back.
    going_away,
    // Closes without a word, as a crash would: peers with a reconnect window dial this
    // address again and resume with the master started next on it.
    restart,
  };
  // Closes every connection (saying `farewell`), joins the thread and logs, at
  // info, the run's summary (master_stats.h: summary_line), once. Idempotent; bounded.
  void stop(Farewell farewell = Farewell::going_away, const std::string& reason = "the master was stopped");

 private:
  // A connection and, until its hello is accepted, its place among the strangers.
  struct Served {
    std::shared_ptr<net::FrameConnection> conn;
    std::shared_ptr<net::StrangerGate::Pass> stranger;
  };

  void serve();
  // `last` (a going_away) goes out on each connection before it closes.
  void close_all(const Status& why, const std::optional<wire::Message>& last = std::nullopt);
  void on_accept(asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> stranger);
  void on_stream(const Status& status, std::shared_ptr<net::Stream> stream,
                 std::shared_ptr<net::StrangerGate::Pass> stranger);
  void apply_effects();
  void check_reachability(const Effects::CheckReachability& check);
  // Twice a second: the state's deadlines that no message brings up.
  void arm_tick();
  // Hands the HTTP endpoint a fresh snapshot of the run (serving thread only).
  void publish();

  MasterServerOptions options_;
  asio::io_context io_;
  asio::steady_timer tick_{io_};  // only on the serving thread
  std::shared_ptr<net::Listener> listener_;
  std::shared_ptr<net::StrangerGate> strangers_;
  std::unique_ptr<MasterHttp> http_;    // null without options_.http_address
  uint64_t started_ms_ = 0;             // the state's clock at start, for the uptime it shows
  std::thread thread_;
  bool started_ = false;                // only on the owner's thread (start/stop)
  std::chrono::steady_clock::time_point started_at_;  // likewise: the summary's run time
  std::atomic<bool> stopped_{false};    // also read on the serving thread (on_stream)
  // Only on the serving thread (and on the owner's, in stop, once that thread has ended):
  MasterState state_;
  std::map<ConnId, Served> connections_;
  ConnId next_conn_ = 1;
  LogThrottle dropped_log_;
};

}  // namespace ferry::master
