// TLS and plain TCP on loopback through the seam every ferry connection uses (Listener +
// dial + Stream): a throwaway PKI made with the openssl CLI, an io_context on two threads
// with a listener, and a connected pair of streams. Shared by the net tests
// (test_net_tls_transport.cpp) and the throughput report (tools/microbench/tls_throughput.cpp).
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include "core/error.h"
#include "net/dialer.h"
#include "net/listener.h"
#include "net/tls_transport.h"

namespace ferry::test {

using namespace std::chrono_literals;

// --- certificates ------------------------------------------------------------------

class TestPki {
 public:
  TestPki() : dir_(std::filesystem::temp_directory_path() / ("ferry-tls-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    make_ca("ca");
    make_leaf("a", "ca");
    make_leaf("b", "ca");
    make_ca("rogue-ca");
    make_leaf("rogue", "rogue-ca");
    // A stranger that trusts our CA (and its own, to load its certificate): only our check can stop it.
    std::ofstream both(dir_ / "both-ca.pem");
    both << std::ifstream(dir_ / "ca.pem").rdbuf() << std::ifstream(dir_ / "rogue-ca.pem").rdbuf();
  }
  ~TestPki() { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  net::TlsConfig config(const std::string& who, const std::string& ca = "ca",
                        std::chrono::milliseconds handshake = 5000ms) const {
    return {path(who + ".pem"), path(who + ".key"), path(ca + ".pem"), handshake};
  }

 private:
  void run(const std::string& command) const {
    std::string line = "cd '" + dir_.string() + "' && " + command + " >/dev/null 2>&1";
    if (std::system(line.c_str()) != 0) throw std::runtime_error("failed: " + command);
  }
  void make_ca(const std::string& name) const {
    run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=" + name +
        " -keyout " + name + ".key -out " + name + ".pem");
  }
  // Leaves act as TLS client and server both (every ferry side dials and accepts).
  void make_leaf(const std::string& name, const std::string& ca) const {
    std::ofstream(dir_ / "leaf.ext") << "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                                        "extendedKeyUsage=serverAuth,clientAuth\n";
    run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=" + name + " -keyout " + name +
        ".key -out " + name + ".csr");
    run("openssl x509 -req -days 2 -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
        ".key -CAcreateserial -extfile leaf.ext -out " + name + ".pem");
  }

  std::filesystem::path dir_;
};

inline const TestPki& pki() {
  static TestPki instance;
  return instance;
}

// --- an io_context on two threads, a listener, and dials -------------------------------

struct Opened {
  Status status;
  std::shared_ptr<net::Stream> stream;
};

class Loopback {
 public:
  explicit Loopback(std::shared_ptr<net::Transport> server_transport)
      : work_(io_.get_executor()), server_transport_(std::move(server_transport)) {
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
    listener_ = net::Listener::bind(io_.get_executor(), "127.0.0.1", 0, 0);
    listener_->start(net::StrangerGate::create("test"), [this](asio::ip::tcp::socket socket, auto) {
      server_transport_->open_server(std::move(socket), [this](Status st, std::shared_ptr<net::Stream> stream) {
        std::lock_guard lock(mu_);
        accepted_.push_back({std::move(st), std::move(stream)});
        cv_.notify_all();
      });
    });
  }
  ~Loopback() {
    listener_->stop();
    work_.reset();
    // Let the handlers still queued (a failed handshake's aborted reads) run
    // and release what they hold, then stop whatever is left.
    for (int i = 0; i < 200 && !io_.stopped(); ++i) std::this_thread::sleep_for(10ms);
    io_.stop();
    for (auto& t : threads_) t.join();
  }

  Opened dial(std::shared_ptr<net::Transport> transport, std::chrono::milliseconds timeout = 5000ms) {
    std::promise<Opened> done;
    net::dial(io_.get_executor(), {"127.0.0.1", listener_->port()}, timeout, std::move(transport),
              [&done](Status st, std::shared_ptr<net::Stream> s) { done.set_value({std::move(st), std::move(s)}); });
    return done.get_future().get();
  }
  // The acceptor's side of the next connection (its handshake's outcome).
  std::optional<Opened> accepted(std::chrono::milliseconds within = 10000ms) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, within, [&] { return !accepted_.empty(); })) return std::nullopt;
    Opened o = std::move(accepted_.front());
    accepted_.pop_front();
    return o;
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<net::Transport> server_transport_;
  std::shared_ptr<net::Listener> listener_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Opened> accepted_;
};

struct Pair {
  std::shared_ptr<net::Stream> client, server;
};

inline Pair connect_pair(Loopback& loop, std::shared_ptr<net::Transport> client_transport) {
  Opened c = loop.dial(std::move(client_transport));
  auto s = loop.accepted();
  if (!c.status.ok()) throw std::runtime_error("dial: " + c.status.message);
  if (!s || !s->status.ok()) throw std::runtime_error("accept: " + (s ? s->status.message : "nothing"));
  return {c.stream, s->stream};
}

}  // namespace ferry::test
