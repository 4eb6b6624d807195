// Insiders at the master (issue 22, attacks 4 and 5): clients that hold the
// run secret but lie. A live 3-peer run all-reduces (every result checked
// exactly) while raw authenticated clients join beside it:
//  (a) one answers every proposed ring by blaming its neighbour ("unreachable");
//  (b) three, from 127.0.0.2..4, advertise a port that accepts and never
//      speaks, and never answer a proposal.
// Neither may get an honest peer evicted, and (b) may stall the run for at
// most about one link timeout in all (before: one timeout per fake). The
// deadline only turns a stall into a failure; it is no benchmark.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include "core/auth_labels.h"
#include "core/run_secret.h"
#include "harness.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace wire = ferry::wire;

namespace {

constexpr size_t kPeers = 3;
constexpr uint32_t kLinkTimeoutMs = 2000;  // the peers' timeout_ms: their ring links' set-up deadline
constexpr size_t kCount = 4099;
const std::string kSecret = "the insiders test's run secret, 32+ bytes";

// A port that accepts (the kernel completes the handshake) and never speaks.
class SilentPort {
 public:
  SilentPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 64) == 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentPort() { ::close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

// A port nothing listens on: connecting to it is refused at once.
uint16_t refused_port() {
  SilentPort bound;
  return bound.port();  // closed again when `bound` goes
}

// A raw client that proves the run secret and joins group 0, then answers
// proposals as told, on a thread of its own.
class FakeJoiner {
 public:
  enum class Answer { never, blame_next };

  FakeJoiner(uint16_t master_port, const std::string& source, uint16_t advertised_port, Answer answer)
      : answer_(answer) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &addr.sin_addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    addr.sin_port = htons(master_port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    auto challenge = read_message(Clock::now() + 5s);
    REQUIRE(challenge);
    wire::Hello hello;
    hello.advertised_host = "127.0.0.1";
    hello.advertised_port = advertised_port;
    hello.p2p_connections = 1;
    hello.heartbeat_timeout_ms = 3'600'000;  // the longest allowed: no heartbeats needed
    hello.nonce = ferry::random_nonce();
    hello.proof = ferry::RunSecret::from_bytes(kSecret).proof(
        ferry::auth_label::kPeerToMaster, std::get<wire::AuthChallenge>(*challenge).nonce, hello.nonce);
    send(hello);
    auto first = read_message(Clock::now() + 5s);
    if (first && std::holds_alternative<wire::Welcome>(*first)) {
      welcomed_ = true;
      self_id_ = std::get<wire::Welcome>(*first).peer_id;
      thread_ = std::thread([this] { serve(); });
    } else if (first && std::holds_alternative<wire::Kick>(*first)) {
      kick_reason_ = std::get<wire::Kick>(*first).reason;
    }
  }
  ~FakeJoiner() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  bool welcomed() const { return welcomed_; }
  bool gone() const { return gone_; }  // kicked, or the master hung up
  std::string kick_reason() {
    std::lock_guard lock(mu_);
    return kick_reason_;
  }

 private:
  void serve() {
    while (!stop_ && !gone_) {
      auto m = read_message(Clock::now() + 50ms);
      if (!m) continue;
      if (auto* kick = std::get_if<wire::Kick>(&*m)) {
        std::lock_guard lock(mu_);
        kick_reason_ = kick->reason;
      }
      const auto* topology = std::get_if<wire::Topology>(&*m);
      if (!topology || answer_ == Answer::never) continue;
      // Blame whoever follows us in the ring: the peer we would dial.
      const auto& ring = topology->ring;
      for (size_t i = 0; i < ring.size(); ++i)
        if (ring[i].peer_id == self_id_ && ring.size() > 1)
          send(wire::TopologyReady{topology->epoch, 6, ring[(i + 1) % ring.size()].peer_id, "unreachable"});
    }
  }

  void send(const wire::Message& m) {
    auto bytes = wire::encode_message(m);
    (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }

  // One whole message, or none by the deadline (then gone_ if the master closed).
  std::optional<wire::Message> read_message(Clock::time_point deadline) {
    while (true) {
      if (buffer_.size() >= wire::kFrameHeaderBytes) {
        std::span<const uint8_t, wire::kFrameHeaderBytes> head(buffer_.data(), wire::kFrameHeaderBytes);
        wire::FrameHeader h;
        if (!wire::decode_frame_header(head, wire::kMaxControlPayload, h).ok()) {
          gone_ = true;
          return std::nullopt;
        }
        if (buffer_.size() >= wire::kFrameHeaderBytes + h.length) {
          std::vector<uint8_t> payload(buffer_.begin() + wire::kFrameHeaderBytes,
                                       buffer_.begin() + static_cast<ptrdiff_t>(wire::kFrameHeaderBytes + h.length));
          buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(wire::kFrameHeaderBytes + h.length));
          auto decoded = wire::decode_message(h.type, payload);
          if (decoded.message) return std::move(*decoded.message);
          continue;
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      uint8_t chunk[4096];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        gone_ = true;
        return std::nullopt;
      }
      buffer_.insert(buffer_.end(), chunk, chunk + n);
    }
  }

  const Answer answer_;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;  // only on the thread reading
  bool welcomed_ = false;
  uint64_t self_id_ = 0;
  std::atomic<bool> gone_{false}, stop_{false};
  std::mutex mu_;
  std::string kick_reason_;  // guarded by mu_
  std::thread thread_;
};

// An authenticated master on 127.0.0.1 and $FERRY_SECRET_FILE for the harness's peers.
class SecretMaster {
 public:
  SecretMaster() {
    dir_ = fs::temp_directory_path() / ("ferry-insiders-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::string secret = (dir_ / "secret").string();
    std::ofstream(secret) << kSecret;
    ::setenv("FERRY_SECRET_FILE", secret.c_str(), 1);
    ferry_master_params params;
    ferry_master_params_init(&params);
    params.listen_address = "127.0.0.1:0";
    params.secret_file = secret.c_str();
    must(ferry_master_create_with(&params, &master_), "ferry_master_create_with");
    must(ferry_master_port(master_, &port_), "ferry_master_port");
    must(ferry_master_run(master_), "ferry_master_run");
  }
  ~SecretMaster() {
    ferry_master_destroy(master_);
    ::unsetenv("FERRY_SECRET_FILE");
    fs::remove_all(dir_);
  }
  uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  fs::path dir_;
  ferry_master* master_ = nullptr;
  uint16_t port_ = 0;
};

// Whole numbers: every summation order gives the same exact float.
float input_value(size_t rank, size_t round, size_t i) {
  return static_cast<float>((i * 7 + round * 13 + rank * 101) % 1000);
}

// The run: kPeers honest peers all-reduce round after round. When the test
// says the fakes are in (agreed by a max-reduce), they vote the ring once;
// "stall" is from that vote to their next correct all-reduce.
struct Run {
  std::atomic<bool> fakes_in{false}, stop{false};
  std::atomic<size_t> ready{0};
  std::mutex mu;
  std::vector<std::string> wrong;  // guarded by mu
  std::vector<int64_t> stall_ms = std::vector<int64_t>(kPeers, -1);
  std::vector<int64_t> world_after = std::vector<int64_t>(kPeers, 0);
  std::vector<bool> kicked = std::vector<bool>(kPeers, false);

  // update_topology may outlast its own deadline (one link timeout) while the
  // fakes' round is decided: the vote stands, so wait for the commit it brings.
  static void vote(ferry_comm* comm) {
    int64_t epoch = attribute(comm, FERRY_ATTR_EPOCH);
    ferry_result r = ferry_update_topology(comm);
    if (r == FERRY_OK) return;
    if (r != FERRY_ERR_TIMEOUT) must(r, "ferry_update_topology");
    auto deadline = Clock::now() + 20s;
    while (attribute(comm, FERRY_ATTR_EPOCH) == epoch) {
      if (Clock::now() > deadline) throw std::runtime_error("no new ring 20 s after the vote");
      std::this_thread::sleep_for(5ms);
    }
  }

  void peer(const std::string& master, size_t who) {
    PeerSettings settings;
    settings.timeout_ms = kLinkTimeoutMs;
    ferry_comm* comm = create_peer(master, settings);
    try {
      grow_group(comm, kPeers);
      ++ready;
      size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
      std::vector<float> data(kCount);
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      bool voted = false;
      Clock::time_point vote_started;
      for (size_t round = 0;; ++round) {
        for (size_t i = 0; i < kCount; ++i) data[i] = input_value(rank, round, i);
        must(ferry_allreduce(comm, data.data(), data.data(), kCount, &desc, nullptr), "ferry_allreduce");
        for (size_t i = 0; i < kCount; ++i) {
          float reference = 0;
          for (size_t r = 0; r < kPeers; ++r) reference += input_value(r, round, i);
          if (data[i] != reference) {
            std::lock_guard lock(mu);
            wrong.push_back("peer " + std::to_string(who) + " round " + std::to_string(round));
            break;
          }
        }
        if (voted && stall_ms[who] < 0)
          stall_ms[who] = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - vote_started).count();
        int32_t flags[2] = {fakes_in ? 1 : 0, stop ? 1 : 0};
        ferry_allreduce_desc flag;
        ferry_allreduce_desc_init(&flag);
        flag.dtype = FERRY_I32;
        flag.op = FERRY_OP_MAX;
        must(ferry_allreduce(comm, flags, flags, 2, &flag, nullptr), "ferry_allreduce (flags)");
        if (flags[1] && stall_ms[who] >= 0) break;
        if (flags[0] && !voted) {
          voted = true;
          vote_started = Clock::now();
          vote(comm);
        }
      }
      world_after[who] = attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE);
    } catch (const CallFailed& e) {
      kicked[who] = e.result == FERRY_ERR_KICKED;
      ferry_comm_destroy(comm);
      throw;
    }
    ferry_comm_destroy(comm);
  }
};

// Runs the honest peers while `attack` does its work; returns their results.
template <class Attack>
std::vector<std::string> run_beside(Run& run, const SecretMaster& master, Attack&& attack) {
  std::thread attacker([&] {
    auto deadline = Clock::now() + 20s;
    while (run.ready < kPeers && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
    attack();
    run.stop = true;
  });
  auto results = run_peers(kPeers, [&](size_t who) { run.peer(master.address(), who); });
  attacker.join();
  return results;
}

size_t count(const std::vector<bool>& flags) { return static_cast<size_t>(std::count(flags.begin(), flags.end(), true)); }

int64_t longest(const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST_CASE("master: an authenticated joiner that blames its neighbour at every proposal evicts nobody honest",
          "[master][insiders]") {
  auto started = Clock::now();
  SecretMaster master;
  Run run;
  SilentPort port;
  std::unique_ptr<FakeJoiner> liar;
  auto results = run_beside(run, master, [&] {
    liar = std::make_unique<FakeJoiner>(master.port(), "127.0.0.2", port.port(), FakeJoiner::Answer::blame_next);
    if (!liar->welcomed()) return;
    run.fakes_in = true;
    auto deadline = Clock::now() + 15s;
    while (!liar->gone() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  });
  std::fprintf(stderr, "insiders (a): honest peers kicked %zu of %zu; stall %lld ms (link timeout %u ms)\n",
               count(run.kicked), kPeers, static_cast<long long>(longest(run.stall_ms)), kLinkTimeoutMs);
  REQUIRE(liar);
  REQUIRE(liar->welcomed());
  CHECK(failures(results) == "");
  CHECK(count(run.kicked) == 0);
  CHECK(run.wrong.empty());
  CHECK(liar->gone());
  CHECK(liar->kick_reason().find("evicted from the ring") != std::string::npos);
  for (int64_t world : run.world_after) CHECK(world == static_cast<int64_t>(kPeers));
  CHECK(Clock::now() - started < 30s);
}

TEST_CASE("master: three fake joiners whose ports never speak stall the run for one link timeout at most",
          "[master][insiders]") {
  auto started = Clock::now();
  SecretMaster master;
  Run run;
  std::vector<std::unique_ptr<SilentPort>> ports;
  std::vector<std::unique_ptr<FakeJoiner>> fakes;
  std::string refused_again;
  auto results = run_beside(run, master, [&] {
    for (int i = 2; i <= 4; ++i) {
      ports.push_back(std::make_unique<SilentPort>());
      fakes.push_back(std::make_unique<FakeJoiner>(master.port(), "127.0.0." + std::to_string(i), ports.back()->port(),
                                                   FakeJoiner::Answer::never));
      if (!fakes.back()->welcomed()) return;
    }
    run.fakes_in = true;
    auto deadline = Clock::now() + 15s;
    auto all_gone = [&] { return std::all_of(fakes.begin(), fakes.end(), [](auto& f) { return f->gone(); }); };
    while (!all_gone() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
    // Back at once: refused, while honest peers from other addresses are not.
    FakeJoiner again(master.port(), "127.0.0.2", ports[0]->port(), FakeJoiner::Answer::never);
    refused_again = again.welcomed() ? "welcomed" : again.kick_reason();
  });
  int64_t stall = longest(run.stall_ms);
  std::fprintf(stderr, "insiders (b): honest peers kicked %zu of %zu; stall %lld ms (link timeout %u ms)\n",
               count(run.kicked), kPeers, static_cast<long long>(stall), kLinkTimeoutMs);
  REQUIRE(fakes.size() == 3);
  for (auto& fake : fakes) REQUIRE(fake->welcomed());
  CHECK(failures(results) == "");
  CHECK(run.wrong.empty());
  for (auto& fake : fakes) CHECK(fake->gone());
  CHECK(refused_again.find("may join again in") != std::string::npos);
  for (int64_t world : run.world_after) CHECK(world == static_cast<int64_t>(kPeers));
  CHECK(stall >= 0);
  CHECK(stall < kLinkTimeoutMs * 3 / 2);
  CHECK(Clock::now() - started < 30s);
}

// The honest neighbour that dials a joiner's refused port learns it at once;
// if it then dropped its own inbound lanes, its other neighbour would blame it
// and a run of honest peers could lose one. It reports once its inbound lanes
// are up, so only the joiner goes.
TEST_CASE("master: a joiner whose port refuses connections is evicted, and no honest neighbour with it",
          "[master][insiders]") {
  SecretMaster master;
  Run run;
  std::unique_ptr<FakeJoiner> fake;
  auto results = run_beside(run, master, [&] {
    fake = std::make_unique<FakeJoiner>(master.port(), "127.0.0.2", refused_port(), FakeJoiner::Answer::never);
    if (!fake->welcomed()) return;
    run.fakes_in = true;
    auto deadline = Clock::now() + 15s;
    while (!fake->gone() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  });
  REQUIRE(fake);
  REQUIRE(fake->welcomed());
  CHECK(failures(results) == "");
  CHECK(count(run.kicked) == 0);
  CHECK(run.wrong.empty());
  CHECK(fake->gone());
  for (int64_t world : run.world_after) CHECK(world == static_cast<int64_t>(kPeers));
}
