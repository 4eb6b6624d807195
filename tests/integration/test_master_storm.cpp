// The garbage storm: while 3 peers run 100+ all-reduces (each result checked
// against a reference and compared bit for bit across peers), 16 attacker
// threads open connection after connection to the master for several
// seconds and send it random bytes, truncated frames, oversized lengths,
// valid-but-forbidden messages, forged hellos, and replays of a real peer's
// authenticated traffic (recorded through a relay). The master holds a run
// secret, so no replay may ever get a welcome. Afterwards the run's results
// must be right, and the master must still admit a fresh peer.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "child_process.h"  // tools/common
#include "core/hash.h"
#include "forged_frame.h"
#include "harness.h"
#include "sanitized_build.h"
#include "stranger_crowd.h"
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry::test;
namespace wire = ferry::wire;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr size_t kPeers = 3;
constexpr size_t kMinRounds = 100;
constexpr size_t kMaxRounds = 2000;
constexpr size_t kAttackers = 16;
constexpr auto kStormLength = 5s;

int connect_loopback(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Splits a byte stream into whole frames (header + payload); a torn tail is dropped.
std::vector<std::vector<uint8_t>> split_frames(const std::vector<uint8_t>& bytes) {
  std::vector<std::vector<uint8_t>> frames;
  size_t at = 0;
  while (bytes.size() - at >= wire::kFrameHeaderBytes) {
    std::span<const uint8_t, wire::kFrameHeaderBytes> head(bytes.data() + at, wire::kFrameHeaderBytes);
    wire::FrameHeader h;
    if (!wire::decode_frame_header(head, wire::kMaxControlPayload, h).ok()) break;
    size_t size = wire::kFrameHeaderBytes + h.length;
    if (bytes.size() - at < size) break;
    frames.emplace_back(bytes.begin() + static_cast<ptrdiff_t>(at), bytes.begin() + static_cast<ptrdiff_t>(at + size));
    at += size;
  }
  return frames;
}

// --- a relay that records what a real peer sends the master -----------------------------

class RecordingRelay {
 public:
  explicit RecordingRelay(uint16_t master_port) : master_port_(master_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(listen_fd_, 4);
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~RecordingRelay() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::vector<uint8_t> recorded() {
    std::lock_guard lock(mu_);
    return to_master_;
  }

 private:
  void run() {
    int client = -1;
    while (!stop_ && client < 0) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) client = ::accept(listen_fd_, nullptr, nullptr);
    }
    if (client < 0) return;
    int master = connect_loopback(master_port_);
    std::array<pollfd, 2> fds{pollfd{client, POLLIN, 0}, pollfd{master, POLLIN, 0}};
    uint8_t buf[65536];
    while (!stop_ && master >= 0) {
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      bool done = false;
      for (int side = 0; side < 2; ++side) {
        if (!(fds[side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::recv(fds[side].fd, buf, sizeof buf, 0);
        if (n <= 0) {
          done = true;
          break;
        }
        if (side == 0) {
          std::lock_guard lock(mu_);
          to_master_.insert(to_master_.end(), buf, buf + n);
        }
        (void)!::send(fds[1 - side].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
      if (done) break;
    }
    ::close(client);
    if (master >= 0) ::close(master);
  }

  uint16_t master_port_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<uint8_t> to_master_;
};

// --- the attackers -------------------------------------------------------------------------

enum class Attack {
  random_bytes,
  random_payload,    // a valid header of a known type over random bytes
  truncated_close,   // a frame cut short, then the write side closed
  truncated_stall,   // a frame cut short, then silence (the attacker gives up first)
  oversized,         // a length beyond the control limit
  forbidden,         // well-formed, but not allowed before hello / from a peer
  forged_hello,      // a hello with a made-up proof
  replay_all,        // a real peer's whole recorded stream
  replay_hello,      // its hello alone
  replay_mutated,    // its stream with bytes flipped
  silent,            // connects and says nothing
  count
};

struct Tally {
  std::mutex mu;
  size_t connections = 0;
  size_t kicks_seen = 0;
  size_t auth_kicks = 0;
  std::string problems;  // one line per violation, capped
  void problem(const std::string& line) {
    std::lock_guard lock(mu);
    if (problems.size() < 4000) problems += line + "\n";
  }
};

struct StormInput {
  uint16_t port;
  std::vector<uint8_t> recorded;               // the real peer's stream to the master
  std::vector<std::vector<uint8_t>> frames;    // ... split into frames; frames[0] is its hello
};

std::vector<wire::Message> forbidden_messages() {
  wire::CollectiveBegin begin{};
  begin.kind = 1;
  wire::SyncBegin sync{};
  sync.tensors.push_back({"w", 9, 100, 1, 0});
  return {wire::TopologyVote{1},
          wire::TopologyReady{1, 0, 0, ""},
          wire::PendingQuery{},
          begin,
          wire::CollectiveEnd{1, 0, 0, ""},
          sync,
          wire::Leave{},
          wire::Welcome{1, "x", std::string(32, 'p')},
          wire::Topology{1, 0, 1, {{1, "127.0.0.1", 9, {}}}},
          wire::Kick{1, "you"},
          wire::AuthChallenge{std::string(32, 'n'), 1},
          wire::LinkHello{1, 2, 3, 0, 1, std::string(32, 'n'), std::string(32, 'p'), "", ""},
          wire::LinkWelcome{0, "", "", 0},
          wire::FetchHello{1, 2, 3, 0, std::string(32, 'n'), std::string(32, 'p')}};
}

// What the master said on one connection, and whether it hung up within the deadline.
struct Answer {
  bool closed = false;
  std::vector<wire::Message> frames;
};

Answer listen_until_closed(int fd, Clock::time_point deadline) {
  Answer answer;
  std::vector<uint8_t> bytes;
  uint8_t buf[8192];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    int wait = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (::poll(&p, 1, std::max(wait, 1)) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      answer.closed = true;
      break;
    }
    bytes.insert(bytes.end(), buf, buf + n);
  }
  for (auto& frame : split_frames(bytes)) {
    std::span<const uint8_t, wire::kFrameHeaderBytes> head(frame.data(), wire::kFrameHeaderBytes);
    wire::FrameHeader h;
    if (!wire::decode_frame_header(head, wire::kMaxControlPayload, h).ok()) break;
    auto decoded = wire::decode_message(h.type, std::span<const uint8_t>(frame).subspan(wire::kFrameHeaderBytes));
    if (decoded.message) answer.frames.push_back(std::move(*decoded.message));
  }
  return answer;
}

void attack_once(const StormInput& in, std::mt19937_64& rng, Tally& tally) {
  auto kind = static_cast<Attack>(rng() % static_cast<uint64_t>(Attack::count));
  int fd = connect_loopback(in.port);
  if (fd < 0) return tally.problem("could not connect to the master");
  auto random_bytes = [&](size_t n) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
  };
  std::vector<uint8_t> bytes;
  bool half_close = true;      // we end the conversation: the master must then close too
  bool expect_kick = false;    // the master must answer with a kick on its own
  bool expect_auth_kick = false;
  switch (kind) {
    case Attack::random_bytes:
      bytes = random_bytes(1 + rng() % 2048);
      break;
    case Attack::random_payload: {
      static constexpr uint16_t kTypes[] = {1, 2, 3, 4, 5, 6, 7, 8, 64, 65, 66, 67, 68, 69, 70, 71, 72, 96, 128, 129, 130, 131, 999};
      uint32_t length = static_cast<uint32_t>(rng() % 512);
      bytes = forged_frame_header(wire::kFrameMagic, wire::kProtocolVersion, kTypes[rng() % std::size(kTypes)], length);
      auto payload = random_bytes(length);
      bytes.insert(bytes.end(), payload.begin(), payload.end());
      break;
    }
    case Attack::truncated_close:
    case Attack::truncated_stall: {
      uint32_t length = 16 + static_cast<uint32_t>(rng() % 1000);
      bytes = forged_frame_header(wire::kFrameMagic, wire::kProtocolVersion, 1, length);
      auto payload = random_bytes(rng() % length);
      bytes.insert(bytes.end(), payload.begin(), payload.end());
      half_close = kind == Attack::truncated_close;
      break;
    }
    case Attack::oversized:
      bytes = forged_frame_header(wire::kFrameMagic, wire::kProtocolVersion, 1,
                           wire::kMaxControlPayload + 1 + static_cast<uint32_t>(rng() % (1u << 30)));
      half_close = false;  // rejected on the header alone
      break;
    case Attack::forbidden: {
      auto all = forbidden_messages();
      bytes = wire::encode_message(all[rng() % all.size()]);
      half_close = false;
      expect_kick = true;
      break;
    }
    case Attack::forged_hello: {
      wire::Hello h;
      h.advertised_port = 9;
      h.p2p_connections = 1;
      h.nonce = std::string(32, 'n');
      h.proof = std::string(reinterpret_cast<const char*>(random_bytes(32).data()), 32);
      bytes = wire::encode_message(h);
      half_close = false;
      expect_kick = expect_auth_kick = true;
      break;
    }
    case Attack::replay_all:
      bytes = in.recorded;
      half_close = false;
      expect_kick = expect_auth_kick = true;
      break;
    case Attack::replay_hello:
      bytes = in.frames.at(0);
      half_close = false;
      expect_kick = expect_auth_kick = true;
      break;
    case Attack::replay_mutated: {
      bytes = in.recorded;
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      break;
    }
    case Attack::silent:
    case Attack::count:
      half_close = false;
      break;
  }
  if (!bytes.empty()) (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  if (half_close) ::shutdown(fd, SHUT_WR);
  bool gives_up_first = kind == Attack::truncated_stall || kind == Attack::silent;
  auto deadline = Clock::now() + (gives_up_first ? std::chrono::milliseconds(50 + rng() % 200) : 5000ms);
  Answer answer = listen_until_closed(fd, deadline);
  ::close(fd);

  std::string name = "attack " + std::to_string(static_cast<int>(kind));
  size_t kicks = 0, auth_kicks = 0;
  for (const auto& m : answer.frames) {
    if (std::holds_alternative<wire::Welcome>(m)) tally.problem(name + ": a stranger got a welcome");
    if (const auto* k = std::get_if<wire::Kick>(&m)) {
      ++kicks;
      if (k->code == static_cast<uint32_t>(ferry::Errc::auth)) ++auth_kicks;
    }
  }
  if (!gives_up_first && !answer.closed) tally.problem(name + ": the master left the connection open for 5 s");
  if (expect_kick && kicks == 0) tally.problem(name + ": closed without a kick");
  if (expect_auth_kick && auth_kicks == 0) tally.problem(name + ": not refused for authentication");
  std::lock_guard lock(tally.mu);
  ++tally.connections;
  tally.kicks_seen += kicks;
  tally.auth_kicks += auth_kicks;
}

// $FERRY_SECRET_FILE for the harness's peers, for the length of one test.
class SecretEnvironment {
 public:
  explicit SecretEnvironment(const std::string& path) { ::setenv("FERRY_SECRET_FILE", path.c_str(), 1); }
  ~SecretEnvironment() { ::unsetenv("FERRY_SECRET_FILE"); }
};

// Values with fractional bits, so a different summation order would show in the bits.
float input_value(size_t rank, size_t round, size_t i) {
  return static_cast<float>(std::sin(0.001 * static_cast<double>(i * 7 + round * 13 + rank * 101)) * 3.0 + 0.1 * static_cast<double>(rank));
}

}  // namespace

TEST_CASE("master: a storm of garbage, forbidden and replayed frames leaves an authenticated run intact",
          "[master][storm]") {
  auto started = Clock::now();
  fs::path dir = fs::temp_directory_path() / ("ferry-storm-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string secret = (dir / "secret").string();
  std::ofstream(secret) << "the storm test's run secret, 32+ bytes\n";
  SecretEnvironment env(secret);

  ferry_master_params params;
  ferry_master_params_init(&params);
  params.listen_address = "127.0.0.1:0";
  params.secret_file = secret.c_str();
  ferry_master* master = nullptr;
  must(ferry_master_create_with(&params, &master), "ferry_master_create_with");
  uint16_t port = 0;
  must(ferry_master_port(master, &port), "ferry_master_port");
  must(ferry_master_run(master), "ferry_master_run");
  std::string address = "127.0.0.1:" + std::to_string(port);

  // Record a real, authenticated peer's conversation with the master: join
  // (its own group), one all-reduce, leave.
  StormInput input{port, {}, {}};
  {
    RecordingRelay relay(port);
    PeerSettings settings;
    settings.group = 77;
    ferry_comm* recorded = create_peer(relay.address(), settings);
    must(ferry_connect(recorded), "ferry_connect (recorded peer)");
    double x = 1.0;
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    desc.dtype = FERRY_F64;
    must(ferry_allreduce(recorded, &x, &x, 1, &desc, nullptr), "ferry_allreduce (recorded peer)");
    ferry_comm_destroy(recorded);
    std::this_thread::sleep_for(100ms);  // let the relay pass the leave on
    input.recorded = relay.recorded();
  }
  input.frames = split_frames(input.recorded);
  REQUIRE(input.frames.size() >= 3);
  {
    std::span<const uint8_t, wire::kFrameHeaderBytes> head(input.frames[0].data(), wire::kFrameHeaderBytes);
    wire::FrameHeader h;
    REQUIRE(wire::decode_frame_header(head, wire::kMaxControlPayload, h).ok());
    REQUIRE(h.type == static_cast<uint16_t>(wire::MessageType::hello));
  }

  // The run, and the storm around it.
  Tally tally;
  std::atomic<bool> run_started{false}, storm_over{false};
  std::vector<std::thread> attackers;
  for (size_t a = 0; a < kAttackers; ++a)
    attackers.emplace_back([&, a] {
      std::mt19937_64 rng(0x5eed0000 + a);
      while (!run_started) std::this_thread::sleep_for(1ms);
      auto end = Clock::now() + kStormLength;
      while (Clock::now() < end) attack_once(input, rng, tally);
    });
  std::thread storm_clock([&] {
    for (auto& t : attackers) t.join();
    storm_over = true;
  });

  const size_t count = 20011;  // not a multiple of anything the ring cuts by
  std::vector<std::vector<uint64_t>> hashes(kPeers);
  std::vector<std::string> wrong(kPeers);
  std::vector<ferry_comm*> comms(kPeers + 1, nullptr);  // the last: the fresh peer after the storm
  std::vector<size_t> rounds_done(kPeers, 0);
  auto results = run_peers(kPeers, [&](size_t who) {
    ferry_comm* comm = create_peer(address);
    comms[who] = comm;
    grow_group(comm, kPeers);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    run_started = true;
    std::vector<float> data(count);
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    size_t round = 0;
    for (; round < kMaxRounds; ++round) {
      for (size_t i = 0; i < count; ++i) data[i] = input_value(rank, round, i);
      must(ferry_allreduce(comm, data.data(), data.data(), count, &desc, nullptr), "ferry_allreduce");
      hashes[who].push_back(ferry::hash_bytes(data.data(), data.size() * sizeof(float)));
      for (size_t i = 0; i < count && wrong[who].empty(); ++i) {
        double reference = 0;
        for (size_t r = 0; r < kPeers; ++r) reference += input_value(r, round, i);
        if (std::fabs(data[i] - reference) > 1e-5 * (1 + std::fabs(reference)))
          wrong[who] = "round " + std::to_string(round) + " element " + std::to_string(i) + ": " +
                       std::to_string(data[i]) + " instead of " + std::to_string(reference);
      }
      // Keep going while the storm lasts (agreed by all: a max-reduce of "still storming").
      int32_t storming = storm_over ? 0 : 1;
      ferry_allreduce_desc flag;
      ferry_allreduce_desc_init(&flag);
      flag.dtype = FERRY_I32;
      flag.op = FERRY_OP_MAX;
      must(ferry_allreduce(comm, &storming, &storming, 1, &flag, nullptr), "ferry_allreduce (flag)");
      if (round + 1 >= kMinRounds && storming == 0) break;
    }
    rounds_done[who] = round + 1;
  });
  storm_clock.join();
  INFO("storm: " << tally.connections << " connections, " << tally.kicks_seen << " kicks (" << tally.auth_kicks
                 << " for authentication)");
  REQUIRE(failures(results) == "");
  CHECK(tally.problems == "");
  CHECK(tally.connections >= kAttackers * 10);
  CHECK(tally.auth_kicks > 0);
  for (auto& w : wrong) CHECK(w == "");
  CHECK(rounds_done[0] >= kMinRounds);
  for (size_t p = 1; p < kPeers; ++p) {
    CHECK(rounds_done[p] == rounds_done[0]);
    CHECK(hashes[p] == hashes[0]);  // bit-identical on every peer, every round
  }

  // The master still serves: a fresh peer joins the run and all-reduces with it.
  auto joined = run_peers(kPeers + 1, [&](size_t who) {
    if (who == kPeers) {
      comms[who] = create_peer(address);
      must(ferry_connect(comms[who]), "ferry_connect (fresh peer)");
    }
    ferry_comm* comm = comms[who];
    wait_for_group(comm, kPeers + 1);
    double one = 1.0;
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    desc.dtype = FERRY_F64;
    must(ferry_allreduce(comm, &one, &one, 1, &desc, nullptr), "ferry_allreduce (after the storm)");
    if (one != static_cast<double>(kPeers + 1)) throw std::runtime_error("wrong sum after the storm");
  });
  CHECK(failures(joined) == "");
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
  ferry_master_destroy(master);
  fs::remove_all(dir);
  CHECK(Clock::now() - started < 30s);
}

// Attacks 1 and 3 of issue 22, against a ferry-master process with its address
// space capped at 768 MiB and 1024 descriptors (soft = hard, so raising the
// limit cannot help): while a 3-peer authenticated run checks every result,
// one source (127.0.0.2) keeps ~1500 idle connections open and fires
// 12-byte headers announcing 4 MiB hellos. The master must stay small, keep
// its descriptors for the run, and admit a fresh peer from another address
// while the attack goes on. On the old master the headers took it to 1.2 GB
// (its serving thread died of bad_alloc under the cap) and the idle crowd
// filled its descriptor table, so the fresh peer got ConnectError.
TEST_CASE("master: a stranger's header storm and idle crowd under tight limits cost the run nothing",
          "[master][storm][strangers]") {
  using ferry::tooling::Child;
  using ferry::tooling::ChildSet;
  raise_own_fd_limit();
  fs::path dir = fs::temp_directory_path() / ("ferry-strangers-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string secret = (dir / "secret").string();
  std::ofstream(secret) << "the stranger test's run secret, 32+ bytes\n";
  SecretEnvironment env(secret);

  ChildSet children(false);
  // Under ASan or TSan the address-space cap and the RSS bound do not apply (sanitized_build.h); the descriptors still do.
  std::vector<std::string> argv = {"prlimit", "--nofile=1024:1024", FERRY_MASTER_BIN, "--listen", "127.0.0.1:0",
                                   "--log-level", "warn"};
  if (!kReservesAddressSpace) argv.insert(argv.begin() + 1, "--as=805306368");
  Child& master = children.spawn("ferry-master", argv);
  REQUIRE(children.pump_until([&] { return !master.running() || master.out().find('\n') != std::string::npos; },
                              ferry::tooling::Clock::now() + 15s));
  const std::string line = master.out().substr(0, master.out().find('\n'));
  REQUIRE(line.rfind("ferry-master listening on ", 0) == 0);
  const uint16_t port = static_cast<uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
  const std::string address = "127.0.0.1:" + std::to_string(port);

  constexpr size_t kCrowd = 1500;
  constexpr size_t kHeadersPerRound = 100;
  const auto big_hello = forged_frame_header(wire::kFrameMagic, wire::kProtocolVersion,
                                             static_cast<uint16_t>(wire::MessageType::hello), 4u << 20);
  std::atomic<bool> attack_on{false}, stop_attack{false};
  std::atomic<size_t> master_fds_peak{0}, crowd_peak{0}, headers_sent{0};
  std::thread attacker([&] {
    StrangerCrowd idle, headers;
    while (!stop_attack) {
      idle.top_up(kCrowd, "127.0.0.2", port);
      headers.disperse();
      headers_sent += headers.arrive(kHeadersPerRound, "127.0.0.2", port, big_hello);
      crowd_peak = std::max<size_t>(crowd_peak, idle.still_open());
      master_fds_peak = std::max(master_fds_peak.load(), open_fds(master.pid()));
      attack_on = true;
      std::this_thread::sleep_for(300ms);
    }
  });

  const size_t count = 20011;
  std::vector<std::string> wrong(kPeers);
  std::vector<ferry_comm*> comms(kPeers + 1, nullptr);
  auto results = run_peers(kPeers, [&](size_t who) {
    ferry_comm* comm = create_peer(address);
    comms[who] = comm;
    grow_group(comm, kPeers);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> data(count);
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    for (size_t round = 0; round < 50; ++round) {
      while (round == 10 && !attack_on) std::this_thread::sleep_for(10ms);  // the rest under attack
      for (size_t i = 0; i < count; ++i) data[i] = input_value(rank, round, i);
      must(ferry_allreduce(comm, data.data(), data.data(), count, &desc, nullptr), "ferry_allreduce");
      for (size_t i = 0; i < count && wrong[who].empty(); ++i) {
        double reference = 0;
        for (size_t r = 0; r < kPeers; ++r) reference += input_value(r, round, i);
        if (std::fabs(data[i] - reference) > 1e-5 * (1 + std::fabs(reference)))
          wrong[who] = "round " + std::to_string(round) + " element " + std::to_string(i);
      }
    }
  });
  REQUIRE(failures(results) == "");
  for (auto& w : wrong) CHECK(w == "");

  // A fresh peer joins while the crowd still stands at the door.
  auto join_started = Clock::now();
  auto joined = run_peers(kPeers + 1, [&](size_t who) {
    if (who == kPeers) {
      comms[who] = create_peer(address);
      must(ferry_connect(comms[who]), "ferry_connect (fresh peer, under attack)");
    }
    wait_for_group(comms[who], kPeers + 1);
    double one = 1.0;
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    desc.dtype = FERRY_F64;
    must(ferry_allreduce(comms[who], &one, &one, 1, &desc, nullptr), "ferry_allreduce (with the fresh peer)");
    if (one != static_cast<double>(kPeers + 1)) throw std::runtime_error("wrong sum with the fresh peer");
  });
  auto join_took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - join_started);
  stop_attack = true;
  attacker.join();
  const uint64_t rss = peak_rss_bytes(master.pid());
  INFO("fresh peer admitted in " << join_took.count() << " ms; master peak RSS " << rss / 1024 << " KiB, peak fds "
                                 << master_fds_peak << "; " << headers_sent << " 4 MiB headers; idle crowd held up to "
                                 << crowd_peak);
  CHECK(failures(joined) == "");
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
  CHECK(master.running());
  CHECK(headers_sent >= kHeadersPerRound);
  CHECK(rss > 0);
  if (!kReservesAddressSpace) CHECK(rss < 64u << 20);  // it was 1.2 GB
  // Strangers get at most a quarter of the 1024 (the run's own few dozen come on top). What the
  // attacker believes open is only reported: a refused connection's close may not have reached it yet.
  CHECK(master_fds_peak <= 1024 / 4 + 64);
  children.stop(master, 2000ms);
  CHECK(master.exit_code() == std::optional<int>(0));
  fs::remove_all(dir);
}
