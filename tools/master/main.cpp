// ferry-master: the standalone coordinator of a ferry run.
#include <csignal>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <asio/ip/address.hpp>

#include "core/log.h"
#include "core/run_secret.h"
#include "master/master_log.h"
#include "master/master_server.h"
#include "net/tls_transport.h"
#include "net/endpoint.h"
#include "net/fd_limit.h"
#include "net/stranger_gate.h"
#include "tool_cli.h"  // tools/common
#include "wire/frame.h"

namespace {

// Raised by the serving thread when it cannot go on (MasterServerOptions::on_failure).
constexpr int kServerFailed = SIGUSR1;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-master: coordinates the peers of a ferry run (membership, rings, collectives)"};
  ferry::net::FdLimit fds = ferry::net::raise_fd_limit();
  ferry::net::StrangerLimits strangers = ferry::net::StrangerLimits::within(fds.soft);
  app.footer("Open files: the soft limit is raised to the hard limit at start (now " + std::to_string(fds.soft) +
             ", hard " + std::to_string(fds.hard) + "). Connections that have not said a valid hello yet are capped at " +
             std::to_string(strangers.total) + " (at most a quarter of the open files), " + std::to_string(strangers.per_source) +
             " per source address; beyond, they are closed at once.\n"
             "Exit status: 0 after SIGINT/SIGTERM, 1 on a start-up error, 2 on a bad argument, 70 if the serving "
             "thread failed (every connection is closed first).");
  std::string listen = "[::]:48148";  // both families
  std::string log_level = "info";
  uint32_t peer_timeout_ms = 10000;
  std::string secret_file;
  std::string ring_order = "best";
  uint32_t max_pending_per_source = ferry::master::MasterLimits{}.max_pending_per_source;
  uint32_t reachability_check_ms = ferry::master::MasterServerOptions{}.limits.reachability_check_ms;
  app.add_option("--listen", listen, "HOST:PORT to listen on")->capture_default_str();
  app.add_option("--ring-order", ring_order,
                 "best: order each ring by its measured links (the slowest link along it as fast as it can be); "
                 "arrival: keep the order peers joined in (a baseline; pairs that cannot connect are still avoided)")
      ->check(CLI::IsMember({"best", "arrival"}))
      ->capture_default_str();
  app.add_option("--max-pending-per-source", max_pending_per_source,
                 "joiners one source address may have waiting for admission at once (many peers behind one NAT, "
                 "or ferry-master-load's fake peers on loopback, need more)")
      ->check(CLI::Range(1u, 65'536u))
      ->capture_default_str();
  app.add_option("--reachability-check-ms", reachability_check_ms,
                 "dial each newcomer's advertised address once, with this deadline, before admitting it: one "
                 "that does not answer (behind NAT or an inbound firewall) has its links dialed from its side "
                 "from its first ring on; 0: no check (the failed link set-ups find such peers, 10-15 s a pair)")
      ->check(CLI::Range(0u, 60'000u))
      ->capture_default_str();
  std::string punch = "on";
  app.add_option("--punch", punch,
                 "on: two peers neither of which can dial the other connect to each other at once from agreed ports "
                 "(a TCP simultaneous open) before a third peer relays their link; off: straight to a relay (networks "
                 "that drop both ends' SYNs, where each punch costs a proposal 10 s)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off")->capture_default_str();
  app.add_option("--peer-timeout-ms", peer_timeout_ms,
                 "remove a peer after this much silence, unless it asked for longer")
      ->check(CLI::Range(100u, 3'600'000u))
      ->capture_default_str();
  app.add_option("--secret-file", secret_file,
                 "file holding the run secret every peer must prove (default: $FERRY_SECRET_FILE; never the secret "
                 "itself on a command line)");
  std::string tls_cert, tls_key, tls_ca;
  auto* cert_option = app.add_option("--tls-cert", tls_cert,
                                     "PEM certificate (chain, leaf first): every connection is then TLS 1.3")
                          ->check(CLI::ExistingFile);
  auto* key_option = app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert (unencrypted)")
                         ->check(CLI::ExistingFile);
  app.add_option("--tls-ca", tls_ca,
                 "PEM CA: peers must present a certificate it signed (mutual TLS); without it the master asks "
                 "peers for no certificate and membership rests on --secret-file")
      ->check(CLI::ExistingFile)
      ->needs(cert_option);
  std::string http;
  app.add_option("--http", http,
                 "HOST:PORT (or PORT: loopback only) of a read-only HTTP endpoint for people watching the run: "
                 "/ (a live dashboard), /status (JSON), /metrics (Prometheus). Never shows the secret, keys or "
                 "tensors; off by default");
  bool keep_peers_on_stop = false;
  app.add_flag("--keep-peers-on-stop", keep_peers_on_stop,
               "on SIGINT/SIGTERM, stop without telling the peers the master is gone: they dial this address "
               "again for their reconnect window and resume with the master started next on it (to replace a "
               "master without ending the run). Without it they are told, and fail at once (master lost)");
  cert_option->needs(key_option);
  key_option->needs(cert_option);
  const std::string version =
      ferry::tooling::version_text("ferry-master", ferry::tooling::built_ferry_version(), ferry::wire::kProtocolVersion);
  ferry::tooling::add_version_flag(app, version);
  if (const auto status = ferry::tooling::parse_command_line(app, argc, argv)) return *status;

  if (!ferry::set_log_level(log_level) || !ferry::master::set_master_log_level(log_level)) {
    std::fprintf(stderr, "ferry-master: unknown --log-level '%s'\n", log_level.c_str());
    return 2;
  }
  std::string error;
  auto endpoint = ferry::net::parse_endpoint(listen, /*allow_port_zero=*/true, &error);
  if (!endpoint) {
    std::fprintf(stderr, "ferry-master: --listen: %s\n", error.c_str());
    return 2;
  }

  // An operator matching a log to a build, or a peer that reports a protocol mismatch, needs these first.
  ferry::log().info("{}", version);

  // Block the stop signals before any thread starts, then wait for them here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, kServerFailed);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    ferry::master::MasterServerOptions options;
    options.listen_host = endpoint->host;
    options.listen_port = endpoint->port;
    options.limits.default_heartbeat_timeout_ms = peer_timeout_ms;
    options.limits.order_rings_by_links = ring_order == "best";
    options.limits.max_pending_per_source = max_pending_per_source;
    options.limits.reachability_check_ms = reachability_check_ms;
    options.limits.punch = punch == "on";
    options.strangers = strangers;
    options.http_address = http;
    // The serving thread cannot end the process itself; it wakes the sigwait below.
    options.on_failure = [main_thread = pthread_self()](const std::string&) { pthread_kill(main_thread, kServerFailed); };
    options.secret = ferry::load_run_secret(secret_file.c_str());
    if (!tls_cert.empty()) {
      ferry::net::TlsConfig tls;
      tls.cert_file = tls_cert;
      tls.key_file = tls_key;
      tls.ca_file = tls_ca;
      options.transport = ferry::net::make_tls_transport(tls);
    }
    ferry::master::MasterServer server(options);
    server.start();
    // Scripts that ask for port 0 read the real one from this line; an IPv6 host is bracketed, so
    // the address can be pasted into a peer's master_address as it stands.
    const ferry::net::Endpoint bound{endpoint->host, server.port()};
    std::printf("ferry-master listening on %s\n", bound.to_string().c_str());
    if (!http.empty()) std::printf("ferry-master dashboard at %s\n", server.http_url().c_str());
    std::fflush(stdout);
    int signal = 0;
    sigwait(&stop_signals, &signal);
    if (signal == kServerFailed) {
      server.stop();
      std::fprintf(stderr, "ferry-master: the serving thread failed (see the log above); exiting\n");
      return 70;
    }
    ferry::log().info("signal {}: shutting down", signal);
    const std::string name = signal == SIGINT ? "SIGINT" : "SIGTERM";
    if (keep_peers_on_stop)
      server.stop(ferry::master::MasterServer::Farewell::restart, "");
    else
      server.stop(ferry::master::MasterServer::Farewell::going_away, "ferry-master got " + name);
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-master: %s\n", e.what());
    return 1;
  }
  return 0;
}
