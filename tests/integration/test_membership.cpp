// Joining, leaving, peer groups, collective votes and mismatches, through the C API.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "one_tensor_state.h"  // tools/common
#include "stranger_crowd.h"    // free_loopback_port
#include "wire/frame.h"
#include "wire/messages.h"

using namespace ferry::test;
namespace wire = ferry::wire;

namespace {

// Sum-all-reduces one value per peer and returns the result.
double allreduce_one(ferry_comm* comm, double value, uint64_t tag = 0) {
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  desc.dtype = FERRY_F64;
  desc.tag = tag;
  must(ferry_allreduce(comm, &value, &value, 1, &desc, nullptr), "ferry_allreduce");
  return value;
}

ferry_result try_allreduce(ferry_comm* comm, size_t count, ferry_dtype dtype = FERRY_F32, uint64_t tag = 0) {
  std::vector<double> buffer(count + 1, 1.0);
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  desc.dtype = dtype;
  desc.tag = tag;
  return ferry_allreduce(comm, buffer.data(), buffer.data(), count, &desc, nullptr);
}

void wait_until(const std::function<bool()>& done, const char* what) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error(std::string("timed out: ") + what);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A master in name only, on 127.0.0.1:port, for a path a real one never
// takes: it challenges the first peer that dials it, reads its hello and
// welcomes it as `peer_id`, then holds the connection open until destroyed.
class ImpostorMaster {
 public:
  ImpostorMaster(uint16_t port, uint64_t peer_id) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 4) != 0)
      throw std::runtime_error("impostor master: cannot listen on port " + std::to_string(port));
    serving_ = std::thread([this, peer_id] { serve(peer_id); });
  }
  ~ImpostorMaster() {
    stop_ = true;
    serving_.join();
    if (conn_ >= 0) ::close(conn_);
    ::close(listener_);
  }
  ImpostorMaster(const ImpostorMaster&) = delete;
  ImpostorMaster& operator=(const ImpostorMaster&) = delete;

  // The hello it welcomed, once it has (read after `welcomed` is true).
  std::atomic<bool> welcomed{false};
  wire::Hello hello;

 private:
  // Waits (up to 20 s, or until stopped) for the fd to be readable.
  bool readable(int fd) {
    for (int waited = 0; waited < 20000 && !stop_; waited += 50) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) > 0) return true;
    }
    return false;
  }
  bool read_exactly(uint8_t* out, size_t n) {
    for (size_t got = 0; got < n;) {
      if (!readable(conn_)) return false;
      const ssize_t r = ::recv(conn_, out + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  void send_message(const wire::Message& m) {
    const std::vector<uint8_t> bytes = wire::encode_message(m);
    ::send(conn_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  void serve(uint64_t peer_id) {
    if (!readable(listener_) || (conn_ = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC)) < 0) return;
    send_message(wire::AuthChallenge{std::string(32, 'n'), 0});
    std::array<uint8_t, wire::kFrameHeaderBytes> head{};
    wire::FrameHeader header;
    if (!read_exactly(head.data(), head.size()) ||
        !wire::decode_frame_header(head, wire::kMaxHandshakePayload, header).ok())
      return;
    std::vector<uint8_t> payload(header.length);
    if (!read_exactly(payload.data(), payload.size())) return;
    wire::DecodedMessage decoded = wire::decode_message(header.type, payload);
    if (!decoded.message || !std::holds_alternative<wire::Hello>(*decoded.message)) return;
    hello = std::get<wire::Hello>(*decoded.message);
    welcomed = true;  // before the welcome: the peer may act on it before this thread runs again
    send_message(wire::Welcome{peer_id, "127.0.0.1", ""});
    while (!stop_) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  int listener_ = -1, conn_ = -1;
  std::atomic<bool> stop_{false};
  std::thread serving_;
};

}  // namespace

// The tests' own wait for a group's size has a deadline: a group that never grows (its
// other peers evicted) once kept a test process alive for over an hour.
TEST_CASE("membership: the tests' wait for a group that never grows gives up at its deadline, naming the sizes",
          "[membership][harness]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  grow_group(comm, 1);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(wait_for_group(comm, 2, std::chrono::milliseconds(1500)),
                    Catch::Contains("the group has 1 of 2 peers after 1500 ms"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  ferry_comm_destroy(comm);
}

TEST_CASE("membership: a newcomer waits, is admitted by update_topology, and joins the next all-reduce",
          "[membership]") {
  EmbeddedMaster master;
  std::atomic<bool> first_round_done{false};
  std::vector<double> before(3, 0), after(3, 0);
  std::vector<int64_t> world_after(3, 0);
  auto results = run_peers(3, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address());
    if (who < 2) {
      grow_group(comm, 2);
      before[who] = allreduce_one(comm, 1.0);
      if (who == 0) first_round_done = true;
      // Poll cheaply until someone waits, then admit it. Every caller gets the same count.
      uint32_t pending = 0;
      wait_until([&] {
        must(ferry_peers_pending(comm, &pending), "ferry_peers_pending");
        return pending > 0;
      }, "newcomer pending");
      must(ferry_update_topology(comm), "ferry_update_topology");
    } else {
      wait_until([&] { return first_round_done.load(); }, "first round");
      must(ferry_connect(comm), "ferry_connect");  // returns once the others admit us
    }
    world_after[who] = attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE);
    after[who] = allreduce_one(comm, 1.0);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  CHECK(before[0] == 2.0);
  CHECK(before[1] == 2.0);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(world_after[i] == 3);
    CHECK(after[i] == 3.0);
  }
}

TEST_CASE("membership: a peer that leaves cleanly is dropped at once, the rest continue in the smaller world",
          "[membership]") {
  EmbeddedMaster master;
  std::promise<void> left;
  auto left_future = left.get_future().share();
  std::vector<ferry_result> first_try(3, FERRY_OK);
  std::vector<double> result(3, 0);
  std::vector<int64_t> world(3, 0);
  auto results = run_peers(3, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    allreduce_one(comm, 1.0);
    if (who == 2) {
      ferry_comm_destroy(comm);
      left.set_value();
      return;
    }
    left_future.wait();
    // The ring lost a member: the next collective says so instead of hanging...
    first_try[who] = try_allreduce(comm, 16);
    // ...and a topology update carries on with the survivors.
    must(ferry_update_topology(comm), "ferry_update_topology");
    world[who] = attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE);
    result[who] = allreduce_one(comm, 1.0);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t i = 0; i < 2; ++i) {
    CHECK(first_try[i] == FERRY_ERR_PEER_LOST);
    CHECK(ferry_result_is_retryable(first_try[i]));
    CHECK(world[i] == 2);
    CHECK(result[i] == 2.0);
  }
}

TEST_CASE("membership: peer groups form separate rings under one master and never mix", "[membership][groups]") {
  EmbeddedMaster master;
  std::vector<double> result(5, 0);
  std::vector<std::array<int64_t, 4>> attrs(5);
  std::latch all_read(5);  // nobody leaves before everyone has read the global attributes
  auto results = run_peers(5, [&](size_t who) {
    PeerSettings settings;
    settings.group = who < 3 ? 7 : 9;  // three peers in group 7, two in group 9
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, who < 3 ? 3 : 2);
    result[who] = allreduce_one(comm, who < 3 ? 1.0 : 100.0);
    // Each group saw the other settle at some point; re-read once both are complete.
    for (int i = 0; i < 200 && attribute(comm, FERRY_ATTR_GLOBAL_WORLD_SIZE) < 5; ++i) {
      must(ferry_update_topology(comm), "ferry_update_topology");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    attrs[who] = {attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE), attribute(comm, FERRY_ATTR_GLOBAL_WORLD_SIZE),
                  attribute(comm, FERRY_ATTR_NUM_GROUPS), attribute(comm, FERRY_ATTR_LARGEST_GROUP_SIZE)};
    all_read.arrive_and_wait();
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t i = 0; i < 5; ++i) {
    CHECK(result[i] == (i < 3 ? 3.0 : 200.0));
    CHECK(attrs[i][0] == (i < 3 ? 3 : 2));
    CHECK(attrs[i][1] == 5);
    CHECK(attrs[i][2] == 2);
    CHECK(attrs[i][3] == 3);
  }
}

TEST_CASE("membership: a peer leaving group A while group B runs all-reduces and syncs: B never notices",
          "[membership][groups][failure]") {
  EmbeddedMaster master;
  constexpr int kRounds = 40;
  // A's peer leaves after B's 5th round, and B's peer 0 holds its 20th until it has: the leave lands mid-run.
  std::latch b_running(1), a_left(1);
  std::vector<int> b_failures(2, 0);
  std::vector<std::vector<int64_t>> b_worlds(2);
  std::vector<double> a_after(3, 0);
  auto results = run_peers(5, [&](size_t who) {
    PeerSettings settings;
    settings.group = who < 3 ? 7 : 9;
    ferry_comm* comm = create_peer(master.address(), settings);
    if (who < 3) {  // group A
      grow_group(comm, 3);
      allreduce_one(comm, 1.0);
      b_running.wait();
      if (who == 2) {
        ferry_comm_destroy(comm);  // leaves while B is mid-run
        a_left.count_down();
        return;
      }
      // The survivors notice (their next all-reduce fails, or their vote drops it) and go on as two.
      while (attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) == 3) {
        double one = 1.0;
        ferry_allreduce_desc desc;
        ferry_allreduce_desc_init(&desc);
        desc.dtype = FERRY_F64;
        if (ferry_allreduce(comm, &one, &one, 1, &desc, nullptr) != FERRY_OK) must(ferry_update_topology(comm), "vote");
      }
      a_after[who] = allreduce_one(comm, 1.0);
      ferry_comm_destroy(comm);
      return;
    }
    // Group B: all-reduces of 256 Ki floats, and a shared-state sync every fifth round.
    size_t b = who - 3;
    grow_group(comm, 2);
    std::vector<float> data(1 << 18), state(4096, 1.5f);
    uint64_t revision = 0;
    for (int round = 0; round < kRounds; ++round) {
      if (b == 0 && round == 5) b_running.count_down();
      if (b == 0 && round == 20) a_left.wait();
      std::fill(data.begin(), data.end(), 1.0f);
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      if (ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr) != FERRY_OK || data[7] != 2.0f)
        ++b_failures[b];
      if (round % 5 == 4) {
        ++revision;
        if (ferry::tooling::sync_one_tensor(comm, "w", state.data(), state.size(), FERRY_F32, revision,
                                            FERRY_SYNC_ENFORCE_POPULAR, nullptr) != FERRY_OK)
          ++b_failures[b];
      }
      b_worlds[b].push_back(attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE));
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t b = 0; b < 2; ++b) {
    INFO("group B peer " << b);
    CHECK(b_failures[b] == 0);
    CHECK(b_worlds[b] == std::vector<int64_t>(kRounds, 2));
  }
  CHECK(a_after[0] == 2.0);
  CHECK(a_after[1] == 2.0);
}

TEST_CASE("membership: peers that issue different collectives all get FERRY_ERR_MISMATCH, then carry on",
          "[membership][mismatch]") {
  EmbeddedMaster master;
  struct Outcome {
    ferry_result count, tag, dtype;
    double after;
  };
  std::vector<Outcome> out(3);
  auto results = run_peers(3, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    out[rank].count = try_allreduce(comm, rank == 1 ? 11 : 10);
    out[rank].tag = try_allreduce(comm, 10, FERRY_F32, rank == 2 ? 5 : 4);
    out[rank].dtype = try_allreduce(comm, 10, rank == 0 ? FERRY_F64 : FERRY_F32);
    out[rank].after = allreduce_one(comm, 1.0);  // the ring is intact: no data moved
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (const auto& o : out) {
    CHECK(o.count == FERRY_ERR_MISMATCH);
    CHECK(o.tag == FERRY_ERR_MISMATCH);
    CHECK(o.dtype == FERRY_ERR_MISMATCH);
    CHECK(o.after == 3.0);
  }
}

TEST_CASE("membership: a world of one returns its own data", "[membership]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  CHECK(attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) == 1);
  std::vector<int32_t> send{1, 2, 3}, recv(3, 0);
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  desc.dtype = FERRY_I32;
  desc.op = FERRY_OP_AVG;
  REQUIRE(ferry_allreduce(comm, send.data(), recv.data(), 3, &desc, nullptr) == FERRY_OK);
  CHECK(recv == send);
  uint32_t pending = 99;
  REQUIRE(ferry_peers_pending(comm, &pending) == FERRY_OK);
  CHECK(pending == 0);
  REQUIRE(ferry_update_topology(comm) == FERRY_OK);  // nothing changed: returns at once
  ferry_comm_destroy(comm);
}

TEST_CASE("membership: a master stopped for good tells its peers: every call fails with FERRY_ERR_MASTER_LOST at once, "
          "whatever their reconnect window",
          "[membership][failure]") {
  const uint32_t window_ms = GENERATE(0u, 300'000u);
  INFO("master_reconnect_timeout_ms " << window_ms);
  EmbeddedMaster master;
  PeerSettings settings;
  settings.master_reconnect_timeout_ms = window_ms;
  ferry_comm* comm = create_peer(master.address(), settings);
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  master.stop();
  // Before going_away, a window of 300 s kept this vote waiting for 300 s.
  const auto began = std::chrono::steady_clock::now();
  CHECK(ferry_update_topology(comm) == FERRY_ERR_MASTER_LOST);
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(60));  // a hang-deadline, not a timing
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("shut down") && Catch::Contains("will not come back"));
  CHECK(try_allreduce(comm, 4) == FERRY_ERR_MASTER_LOST);
  ferry_comm_destroy(comm);
}

TEST_CASE("membership: a master stopped for a restart that never comes: calls are retryable within the window, then "
          "fail with FERRY_ERR_MASTER_LOST",
          "[membership][failure]") {
  EmbeddedMaster master;
  PeerSettings settings;
  settings.master_reconnect_timeout_ms = 300;
  ferry_comm* comm = create_peer(master.address(), settings);
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  master.stop_for_restart();
  // Inside the window: retryable, and a vote waits for the master until the window closes.
  wait_until([&] { return try_allreduce(comm, 4) == FERRY_ERR_PEER_LOST; }, "master being reconnected");
  CHECK(std::string(ferry_last_error()).find("reconnect") != std::string::npos);
  wait_until([&] { return ferry_update_topology(comm) == FERRY_ERR_MASTER_LOST; }, "master lost");
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("did not come back"));
  CHECK(try_allreduce(comm, 4) == FERRY_ERR_MASTER_LOST);
  ferry_comm_destroy(comm);
}

TEST_CASE("membership: a master stopped and started again on its port takes its peers back: same ids, same members, "
          "exact results",
          "[membership][failure][resume]") {
  const Wire wire = GENERATE(Wire::plain, Wire::tls);
  WireScope scope(wire);
  INFO("wire " << wire_name(wire));
  auto master = std::make_unique<EmbeddedMaster>();
  const uint16_t port = master->port();
  constexpr size_t kPeers = 3;
  std::vector<ferry_comm*> comms(kPeers);
  std::vector<std::vector<uint64_t>> rings_before(kPeers), rings_after(kPeers);
  std::vector<int64_t> ids(kPeers);
  auto ring_of = [](ferry_comm* comm) {
    std::vector<uint64_t> ring(16);
    size_t n = 0;
    must(ferry_comm_ring(comm, ring.data(), ring.size(), &n), "ferry_comm_ring");
    ring.resize(n);
    return ring;
  };
  REQUIRE(failures(run_peers(kPeers, [&](size_t who) {
            comms[who] = create_peer(master->address());
            grow_group(comms[who], kPeers);
            allreduce_one(comms[who], 1.0);
            rings_before[who] = ring_of(comms[who]);
            ids[who] = attribute(comms[who], FERRY_ATTR_PEER_ID);
          })) == "");
  master->stop_for_restart();
  master.reset();
  // Every peer sees the loss (a retryable failure) before the new master is up.
  REQUIRE(failures(run_peers(kPeers, [&](size_t who) {
            wait_until([&] { return try_allreduce(comms[who], 4) == FERRY_ERR_PEER_LOST; }, "master loss seen");
          })) == "");
  master = std::make_unique<EmbeddedMaster>(0, "127.0.0.1", port);
  std::vector<double> sums(kPeers);
  REQUIRE(failures(run_peers(kPeers, [&](size_t who) {
            ferry_comm* comm = comms[who];
            must(ferry_update_topology(comm), "ferry_update_topology after the master came back");
            sums[who] = allreduce_one(comm, static_cast<double>(who + 1));
            rings_after[who] = ring_of(comm);
            if (attribute(comm, FERRY_ATTR_PEER_ID) != ids[who]) throw std::runtime_error("peer id changed");
          })) == "");
  // The same members; the order may change, since the new master measures the links afresh.
  for (auto& ring : rings_before) std::sort(ring.begin(), ring.end());
  for (auto& ring : rings_after) std::sort(ring.begin(), ring.end());
  for (size_t who = 0; who < kPeers; ++who) {
    CHECK(sums[who] == 6.0);
    CHECK(rings_after[who] == rings_before[who]);
  }
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
}

TEST_CASE("membership: two copies of the README program started together both reduce in a world of two",
          "[membership][wait]") {
  EmbeddedMaster master;
  std::vector<double> sums(2);
  std::vector<int64_t> worlds(2);
  REQUIRE(failures(run_peers(2, [&](size_t who) {
            ferry_comm* comm = create_peer(master.address());
            must(ferry_connect(comm), "ferry_connect");
            must(ferry_wait_for_world(comm, 2, 0), "ferry_wait_for_world");
            worlds[who] = attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE);
            sums[who] = allreduce_one(comm, static_cast<double>(who + 1));
            ferry_comm_destroy(comm);
          })) == "");
  CHECK(worlds == std::vector<int64_t>{2, 2});
  CHECK(sums == std::vector<double>{3.0, 3.0});
}

TEST_CASE("membership: waiting for a world that never comes ends at the deadline, with one vote, not a spin",
          "[membership][wait]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  const int64_t epoch = attribute(comm, FERRY_ATTR_EPOCH);
  const auto started = std::chrono::steady_clock::now();
  CHECK(ferry_wait_for_world(comm, 2, 1500) == FERRY_ERR_TIMEOUT);
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("1 of 2 peers"));
  CHECK(took >= std::chrono::milliseconds(1400));
  CHECK(took < std::chrono::seconds(10));
  // The master held one vote to its end (a renewal), where a loop of votes would have renewed the ring again and again.
  CHECK(attribute(comm, FERRY_ATTR_EPOCH) - epoch <= 1);
  CHECK(ferry_wait_for_world(comm, 1, 0) == FERRY_OK);  // as large as asked: at once
  CHECK(ferry_wait_for_world(comm, 0, 0) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_wait_for_world(nullptr, 2, 0) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(allreduce_one(comm, 4.0) == 4.0);  // still usable
  ferry_comm_destroy(comm);
}

TEST_CASE("membership: a peer started two seconds before its master connects once the master is up",
          "[membership][connect]") {
  const uint16_t port = free_loopback_port();
  ferry_comm* comm = create_peer("127.0.0.1:" + std::to_string(port));
  std::atomic<ferry_result> connected{FERRY_ERR_INTERNAL};
  std::thread dialing([&] { connected = ferry_connect(comm); });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  CHECK(connected == FERRY_ERR_INTERNAL);  // still dialing: nobody answers yet
  EmbeddedMaster master(0, "127.0.0.1", port);
  dialing.join();  // within a second of the master (the back-off's longest pause)
  REQUIRE(connected == FERRY_OK);
  CHECK(attribute(comm, FERRY_ATTR_GROUP_WORLD_SIZE) == 1);
  CHECK(allreduce_one(comm, 3.0) == 3.0);
  ferry_comm_destroy(comm);
}

TEST_CASE("membership: a master that takes a peer back under another id is refused with a clear error, no hang",
          "[membership][failure][resume]") {
  auto master = std::make_unique<EmbeddedMaster>();
  const uint16_t port = master->port();
  PeerSettings settings;
  settings.master_reconnect_timeout_ms = 20000;
  ferry_comm* comm = create_peer(master->address(), settings);
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  const auto id = static_cast<uint64_t>(attribute(comm, FERRY_ATTR_PEER_ID));
  master->stop_for_restart();
  master.reset();
  ImpostorMaster impostor(port, id + 1);
  // The vote waits for a master; the one that answers welcomes another peer: this one is dead, not confused.
  CHECK(ferry_update_topology(comm) == FERRY_ERR_PROTOCOL);
  CHECK_THAT(std::string(ferry_last_error()), Catch::Contains("under another id"));
  REQUIRE(impostor.welcomed);
  CHECK(impostor.hello.resume_peer_id == id);
  CHECK(try_allreduce(comm, 4) == FERRY_ERR_PROTOCOL);
  CHECK(attribute(comm, FERRY_ATTR_PEER_ID) == static_cast<int64_t>(id));
  ferry_comm_destroy(comm);
}

TEST_CASE("membership: every peer sees the same ring of ids, itself at its rank", "[membership]") {
  EmbeddedMaster master;
  std::vector<std::vector<uint64_t>> rings(3);
  std::vector<int64_t> ids(3), ranks(3), epochs(3);
  auto results = run_peers(3, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    size_t n = 0;
    must(ferry_comm_ring(comm, nullptr, 0, &n), "ferry_comm_ring");
    rings[who].resize(n);
    must(ferry_comm_ring(comm, rings[who].data(), n, &n), "ferry_comm_ring");
    ids[who] = attribute(comm, FERRY_ATTR_PEER_ID);
    ranks[who] = attribute(comm, FERRY_ATTR_RANK);
    epochs[who] = attribute(comm, FERRY_ATTR_EPOCH);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t i = 0; i < 3; ++i) {
    REQUIRE(rings[i].size() == 3);
    CHECK(rings[i] == rings[0]);
    CHECK(rings[i][static_cast<size_t>(ranks[i])] == static_cast<uint64_t>(ids[i]));
    CHECK(epochs[i] == epochs[0]);
  }
}

TEST_CASE("membership: calls out of order fail on every peer at once as a mismatch naming each side's call",
          "[membership][order]") {
  EmbeddedMaster master;
  PeerSettings settings;
  settings.timeout_ms = 60'000;  // the old outcome: both waited this long
  std::vector<ferry_comm*> comms(2);
  REQUIRE(failures(run_peers(2, [&](size_t who) {
            comms[who] = create_peer(master.address(), settings);
            must(ferry_connect(comms[who]), "ferry_connect");
            must(ferry_wait_for_world(comms[who], 2, 0), "ferry_wait_for_world");
          })) == "");
  std::vector<ferry_result> results(2);
  std::vector<std::string> messages(2);
  std::vector<double> took(2);
  auto timed = [&](size_t who, const std::function<ferry_result()>& call) {
    const auto started = std::chrono::steady_clock::now();
    results[who] = call();
    took[who] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    messages[who] = ferry_last_error();
  };
  std::string second_call;
  SECTION("update_topology where the other all-reduces") {
    second_call = "called ferry_update_topology";
    REQUIRE(failures(run_peers(2, [&](size_t who) {
              if (who == 0) timed(0, [&] { return try_allreduce(comms[0], 16); });
              else timed(1, [&] { return ferry_update_topology(comms[1]); });
            })) == "");
  }
  SECTION("peers_pending where the other all-reduces") {
    second_call = "called ferry_peers_pending";
    REQUIRE(failures(run_peers(2, [&](size_t who) {
              uint32_t pending = 0;
              if (who == 0) timed(0, [&] { return try_allreduce(comms[0], 16); });
              else timed(1, [&] { return ferry_peers_pending(comms[1], &pending); });
            })) == "");
  }
  SECTION("peers started with different world sizes: one waits for 3 while the other reduces") {
    second_call = "called ferry_wait_for_world";
    REQUIRE(failures(run_peers(2, [&](size_t who) {
              if (who == 0) timed(0, [&] { return try_allreduce(comms[0], 16); });
              else timed(1, [&] { return ferry_wait_for_world(comms[1], 3, 0); });
            })) == "");
  }
  INFO(messages[0] << "\n" << messages[1]);
  CHECK(results == std::vector<ferry_result>{FERRY_ERR_MISMATCH, FERRY_ERR_MISMATCH});
  for (size_t who = 0; who < 2; ++who) {
    CHECK(took[who] < 5.0);  // at once, not at the 60 s deadline
    CHECK_THAT(messages[who], Catch::Contains("calls out of order") && Catch::Contains(second_call) &&
                                  Catch::Contains("called all_reduce(count 16, f32, sum") &&
                                  Catch::Contains("rank 0 (peer ") && Catch::Contains("rank 1 (peer "));
  }
  // Both carry on with their next calls in the same order.
  REQUIRE(failures(run_peers(2, [&](size_t who) {
            must(ferry_update_topology(comms[who]), "ferry_update_topology");
            if (allreduce_one(comms[who], 1.0) != 2.0) throw std::runtime_error("wrong sum");
          })) == "");
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
}

TEST_CASE("membership: a collective one member never begins times out on every peer naming that member",
          "[membership][order]") {
  EmbeddedMaster master;
  PeerSettings settings;
  settings.timeout_ms = 1500;
  std::vector<ferry_comm*> comms(3);
  REQUIRE(failures(run_peers(3, [&](size_t who) {
            comms[who] = create_peer(master.address(), settings);
            // Admission (links and probes of every pair) may outlast the short timeout: waiting again is allowed.
            ferry_result r = FERRY_ERR_TIMEOUT;
            for (int tries = 0; tries < 10 && r == FERRY_ERR_TIMEOUT; ++tries) r = ferry_connect(comms[who]);
            must(r, "ferry_connect");
            r = FERRY_ERR_TIMEOUT;
            for (int tries = 0; tries < 10 && r == FERRY_ERR_TIMEOUT; ++tries) r = ferry_wait_for_world(comms[who], 3, 20'000);
            must(r, "ferry_wait_for_world");
          })) == "");
  std::vector<size_t> rank(3);
  for (size_t who = 0; who < 3; ++who) rank[who] = static_cast<size_t>(attribute(comms[who], FERRY_ATTR_RANK));
  std::vector<std::string> messages(2);
  REQUIRE(failures(run_peers(2, [&](size_t who) {  // peer 2 stays away (busy with something else)
            if (try_allreduce(comms[who], 8) != FERRY_ERR_TIMEOUT) throw std::runtime_error("not a timeout");
            messages[who] = ferry_last_error();
          })) == "");
  for (const std::string& message : messages)
    CHECK_THAT(message, Catch::Contains("did not start collective 0 within 1500 ms; not begun by rank " +
                                        std::to_string(rank[2]) + " (peer "));
  for (ferry_comm* comm : comms) ferry_comm_destroy(comm);
}
