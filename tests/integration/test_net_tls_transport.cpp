// The TLS transport on loopback, through the same Listener + dial + Stream
// seam every ferry connection uses: framed control messages, the blocking
// bulk path (64 MiB intact; abort() unblocks a blocked reader and writer),
// mutual verification (a certificate from another CA is refused, either
// way round, and the acceptor keeps serving), and a plain-TCP endpoint
// meeting a TLS one (both give up within the handshake deadline).
//
// Certificates: a throwaway CA, two leaves it signed, and a second CA with a
// leaf of its own, made with the openssl CLI in a temporary directory.
//
// Built into ferry_net_integration_tests, which links the static layers
// (net, master, peer); the whole-run cases over the C API are in
// test_tls_runs.cpp.
#include <catch2/catch.hpp>

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include "core/hash.h"
#include "master/master_server.h"
#include "net/dialer.h"
#include "net/frame_connection.h"
#include "net/frame_io.h"
#include "net/listener.h"
#include "net/tls_transport.h"
#include "peer/communicator.h"
#include "wire/chunk_header.h"
#include "tls_loopback.h"

namespace fs = std::filesystem;
namespace net = ferry::net;
namespace wire = ferry::wire;
using ferry::Errc;
using ferry::Status;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using ferry::test::connect_pair;
using ferry::test::Loopback;
using ferry::test::Opened;
using ferry::test::Pair;
using ferry::test::pki;

namespace {

// A deterministic payload for chunk `index`.
void fill(std::vector<uint8_t>& buffer, size_t size, uint64_t index) {
  buffer.resize(size);
  uint64_t x = index * 0x9e3779b97f4a7c15ULL + 1;
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buffer[i] = static_cast<uint8_t>(x);
  }
}

// Round trip of one frame over a pair opened by the caller.
std::optional<wire::Message> echo_through(const Pair& pair, const wire::Message& message) {
  auto server = net::FrameConnection::create(pair.server);
  server->start({[server](wire::Message m) { server->send(m); }, nullptr});
  std::promise<wire::Message> echoed;
  std::atomic<bool> once{false};
  auto client = net::FrameConnection::create(pair.client);
  client->start({[&](wire::Message m) {
                   if (!once.exchange(true)) echoed.set_value(std::move(m));
                 },
                 nullptr});
  client->send(message);
  auto future = echoed.get_future();
  std::optional<wire::Message> out;
  if (future.wait_for(5s) == std::future_status::ready) out = future.get();
  client->close(Status::success());
  server->close(Status::success());
  return out;
}

}  // namespace

TEST_CASE("tls: framed messages round trip over mutual TLS", "[tls]") {
  auto transport = net::make_tls_transport(pki().config("a"));
  CHECK(transport->name() == "tls");
  Loopback loop(net::make_tls_transport(pki().config("b")));
  Pair pair = connect_pair(loop, transport);

  wire::Topology topology;
  topology.epoch = 7;
  topology.peer_group = 3;
  topology.p2p_connections = 4;
  for (uint64_t i = 1; i <= 300; ++i) topology.ring.push_back({i, "10.0.0." + std::to_string(i % 250), uint16_t(i), {}});
  auto echoed = echo_through(pair, topology);
  REQUIRE(echoed);
  REQUIRE(std::holds_alternative<wire::Topology>(*echoed));
  const auto& back = std::get<wire::Topology>(*echoed);
  CHECK(back.epoch == 7);
  CHECK(back.peer_group == 3);
  CHECK(back.ring == topology.ring);
}

TEST_CASE("frame connection: an allocation failure in one connection's handler closes that connection only",
          "[net][strangers]") {
  Loopback loop(net::make_tcp_transport());
  Pair doomed = connect_pair(loop, net::make_tcp_transport());
  Pair healthy = connect_pair(loop, net::make_tcp_transport());
  std::promise<Status> doomed_closed;
  auto server = net::FrameConnection::create(doomed.server);
  // What a serving handler does when memory runs out mid-message.
  server->start({[](wire::Message) { throw std::bad_alloc(); },
                 [&doomed_closed](const Status& why) { doomed_closed.set_value(why); }});
  auto client = net::FrameConnection::create(doomed.client);
  client->start({nullptr, nullptr});
  client->send(wire::PendingQuery{});
  auto closed = doomed_closed.get_future();
  REQUIRE(closed.wait_for(5s) == std::future_status::ready);
  Status why = closed.get();
  CHECK(why.code == Errc::system);
  CHECK(why.message.find("out of memory") != std::string::npos);
  // The io threads survived it: another connection on them still serves.
  auto echoed = echo_through(healthy, wire::PendingCount{7});
  REQUIRE(echoed);
  CHECK(std::get<wire::PendingCount>(*echoed).pending == 7);
}

TEST_CASE("tls: blocking bulk transfer of 64 MiB arrives intact, abort() unblocks reader and writer", "[tls]") {
  auto transport = net::make_tls_transport(pki().config("a"));
  Loopback loop(net::make_tls_transport(pki().config("b")));
  Pair pair = connect_pair(loop, transport);
  pair.client->enter_blocking_mode();
  pair.server->enter_blocking_mode();

  // Sizes exercise the record gathering: whole MiBs, tiny chunks, a header-only chunk, odd tails.
  std::vector<uint32_t> sizes;
  for (uint32_t i = 0; i < 64; ++i) {
    sizes.push_back(1u << 20);
    if (i % 8 == 3) sizes.push_back(i);          // 3, 11, ... bytes: well under a record
    if (i % 16 == 5) sizes.push_back(16384 + i);  // just over a record
  }
  std::string writer_error;
  std::thread writer([&] {
    std::vector<uint8_t> payload;
    for (uint32_t k = 0; k < sizes.size(); ++k) {
      fill(payload, sizes[k], k);
      wire::ChunkHeader h{k, k, sizes[k], ferry::hash_bytes(payload.data(), payload.size())};
      auto header = wire::encode_chunk_header(h);
      std::array<asio::const_buffer, 2> buffers{asio::buffer(header), asio::buffer(payload)};
      if (auto ec = pair.client->write_all_blocking(buffers)) {
        writer_error = "chunk " + std::to_string(k) + ": " + ec.message();
        return;
      }
    }
  });
  std::string reader_error;
  size_t received = 0;
  std::vector<uint8_t> got, want;
  for (uint32_t k = 0; k < sizes.size() && reader_error.empty(); ++k) {
    std::array<uint8_t, wire::kChunkHeaderBytes> bytes{};
    if (auto ec = pair.server->read_exact_blocking(asio::buffer(bytes))) {
      reader_error = "header " + std::to_string(k) + ": " + ec.message();
      break;
    }
    wire::ChunkHeader h;
    if (!wire::decode_chunk_header(bytes.data(), h) || h.seq != k || h.length != sizes[k]) {
      reader_error = "bad header " + std::to_string(k);
      break;
    }
    got.resize(h.length);
    if (auto ec = pair.server->read_exact_blocking(asio::buffer(got))) {
      reader_error = "payload " + std::to_string(k) + ": " + ec.message();
      break;
    }
    fill(want, h.length, k);
    if (got != want || ferry::hash_bytes(got.data(), got.size()) != h.checksum) {
      size_t at = 0;
      while (at < got.size() && got[at] == want[at]) ++at;
      reader_error = "payload " + std::to_string(k) + " of " + std::to_string(got.size()) + " bytes differs from byte " +
                     std::to_string(at);
    }
    received += h.length;
  }
  writer.join();
  REQUIRE(writer_error == "");
  REQUIRE(reader_error == "");
  CHECK(received >= (64u << 20));

  SECTION("abort() unblocks a reader blocked on a silent stream") {
    auto started = Clock::now();
    std::thread aborter([&] {
      std::this_thread::sleep_for(200ms);
      pair.server->abort();
    });
    std::array<uint8_t, 16> nothing{};
    std::error_code ec = pair.server->read_exact_blocking(asio::buffer(nothing));
    aborter.join();
    CHECK(ec);
    CHECK(Clock::now() - started < 5s);
    CHECK(pair.server->read_exact_blocking(asio::buffer(nothing)));  // later calls fail at once
    // The far side sees the hang-up too.
    CHECK(pair.client->read_exact_blocking(asio::buffer(nothing)));
  }
  SECTION("abort() unblocks a writer blocked on a full socket") {
    std::error_code ec;
    std::thread flood([&] {
      std::vector<uint8_t> block(4 << 20, 0xab);
      std::array<asio::const_buffer, 1> buffers{asio::buffer(block)};
      // Nobody reads: the socket buffers fill and a write blocks until abort().
      for (int i = 0; i < 1024 && !ec; ++i) ec = pair.client->write_all_blocking(buffers);
    });
    std::this_thread::sleep_for(300ms);
    auto started = Clock::now();
    pair.client->abort();
    flood.join();
    CHECK(ec);
    CHECK(Clock::now() - started < 5s);
  }
}

TEST_CASE("tls: bytes sent right behind a handshake frame survive the switch to blocking mode", "[tls]") {
  // The dialer does not wait: its bulk bytes may already sit in the acceptor's
  // TLS buffers when the acceptor, having read the frame, switches modes.
  Loopback loop(net::make_tls_transport(pki().config("b")));
  Pair pair = connect_pair(loop, net::make_tls_transport(pki().config("a")));
  std::vector<uint8_t> bulk;
  fill(bulk, (1 << 20) + 77, 99);
  std::promise<Status> written;
  asio::post(pair.client->executor(), [&] {
    net::write_one_message(pair.client, wire::LinkHello{1, 2, 3, 0, 1, "n", "", "", ""}, [&](Status st) { written.set_value(st); });
  });
  REQUIRE(written.get_future().get().ok());
  pair.client->enter_blocking_mode();
  std::thread writer([&] {
    std::array<asio::const_buffer, 1> b{asio::buffer(bulk)};
    (void)pair.client->write_all_blocking(b);
  });
  std::this_thread::sleep_for(50ms);  // let the bulk bytes arrive before the frame is read
  std::promise<std::optional<wire::Message>> read;
  asio::post(pair.server->executor(), [&] {
    net::read_one_message(pair.server, 5s, 4096, [&](Status, std::optional<wire::Message> m) { read.set_value(m); });
  });
  auto hello = read.get_future().get();
  REQUIRE(hello);
  CHECK(std::holds_alternative<wire::LinkHello>(*hello));
  pair.server->enter_blocking_mode();
  std::vector<uint8_t> got(bulk.size());
  std::error_code ec = pair.server->read_exact_blocking(asio::buffer(got));
  writer.join();
  REQUIRE_FALSE(ec);
  CHECK(got == bulk);
}

TEST_CASE("tls: a certificate from another CA is refused both ways (Errc::auth), the acceptor keeps serving", "[tls]") {
  Loopback loop(net::make_tls_transport(pki().config("b")));

  SECTION("the acceptor refuses a stranger's certificate") {
    Opened c = loop.dial(net::make_tls_transport(pki().config("rogue", "both-ca")));
    auto s = loop.accepted();
    REQUIRE(s);
    CHECK(s->status.code == Errc::auth);
    CHECK(c.status.code == Errc::auth);
    CHECK(c.stream == nullptr);
    INFO(c.status.message << " / " << s->status.message);
  }
  SECTION("the dialer refuses an acceptor it cannot verify") {
    Opened c = loop.dial(net::make_tls_transport(pki().config("rogue", "rogue-ca")));
    auto s = loop.accepted();
    REQUIRE(s);
    CHECK(c.status.code == Errc::auth);
    CHECK(s->status.code == Errc::auth);
    INFO(c.status.message << " / " << s->status.message);
  }
  // Either way the acceptor still serves a peer with a good certificate.
  Pair good = connect_pair(loop, net::make_tls_transport(pki().config("a")));
  auto echoed = echo_through(good, wire::Kick{3, "still here"});
  REQUIRE(echoed);
  CHECK(std::get<wire::Kick>(*echoed).reason == "still here");
}

TEST_CASE("tls: plain TCP and TLS endpoints give up on each other within the handshake deadline", "[tls]") {
  const auto deadline = 500ms;

  SECTION("a silent plain-TCP dialer: the TLS acceptor times out and hangs up") {
    Loopback loop(net::make_tls_transport(pki().config("b", "ca", deadline)));
    Opened c = loop.dial(net::make_tcp_transport());
    REQUIRE(c.status.ok());  // TCP itself connects
    auto started = Clock::now();
    std::promise<Status> read;
    asio::post(c.stream->executor(), [&] {
      net::read_one_message(c.stream, 10s, wire::kMaxControlPayload,
                            [&](Status st, std::optional<wire::Message>) { read.set_value(st); });
    });
    Status st = read.get_future().get();
    CHECK_FALSE(st.ok());
    CHECK(st.code != Errc::timeout);  // the acceptor hung up; the reader's own 10 s never ran out
    CHECK(Clock::now() - started < 5s);
    auto s = loop.accepted();
    REQUIRE(s);
    CHECK(s->status.code == Errc::timeout);
  }
  SECTION("a plain-TCP dialer that talks first: the TLS acceptor refuses it at once") {
    Loopback loop(net::make_tls_transport(pki().config("b", "ca", 10s)));
    Opened c = loop.dial(net::make_tcp_transport());
    REQUIRE(c.status.ok());
    auto started = Clock::now();
    std::promise<Status> exchanged;
    asio::post(c.stream->executor(), [&] {
      wire::Hello hello;
      hello.p2p_connections = 1;
      net::write_one_message(c.stream, hello, [&](Status) {
        net::read_one_message(c.stream, 10s, wire::kMaxControlPayload,
                              [&](Status st, std::optional<wire::Message>) { exchanged.set_value(st); });
      });
    });
    CHECK_FALSE(exchanged.get_future().get().ok());
    auto s = loop.accepted();
    REQUIRE(s);
    CHECK(s->status.code == Errc::connect);
    CHECK(Clock::now() - started < 5s);
  }
  SECTION("a TLS dialer meeting a plain-TCP acceptor times out") {
    Loopback loop(net::make_tcp_transport());
    auto started = Clock::now();
    Opened c = loop.dial(net::make_tls_transport(pki().config("a", "ca", deadline)), 10s);
    CHECK(c.status.code == Errc::timeout);
    CHECK(Clock::now() - started < 5s);
  }
  // And a TLS acceptor still serves TLS afterwards.
  Loopback loop(net::make_tls_transport(pki().config("b", "ca", deadline)));
  Pair good = connect_pair(loop, net::make_tls_transport(pki().config("a")));
  auto echoed = echo_through(good, wire::Leave{});
  CHECK((echoed && std::holds_alternative<wire::Leave>(*echoed)));
}

TEST_CASE("tls: bad certificate files are refused with a clear message", "[tls]") {
  auto refused = [](const net::TlsConfig& config) -> std::string {
    try {
      net::make_tls_transport(config);
    } catch (const ferry::Error& e) {
      return e.code() == Errc::invalid_argument ? e.what() : std::string("wrong code: ") + e.what();
    }
    return "accepted";
  };
  auto good = pki().config("a");

  auto missing = good;
  missing.cert_file = pki().path("nowhere.pem");
  CHECK_THAT(refused(missing), Catch::Contains("cannot read cert_file"));

  auto garbage = good;
  garbage.ca_file = pki().path("leaf.ext");  // not PEM
  CHECK_THAT(refused(garbage), Catch::Contains("ca_file"));

  auto mismatched = good;
  mismatched.key_file = pki().path("b.key");
  CHECK_THAT(refused(mismatched), Catch::Contains("does not match"));

  auto foreign = good;
  foreign.ca_file = pki().path("rogue-ca.pem");
  CHECK_THAT(refused(foreign), Catch::Contains("does not verify against ca_file"));

  CHECK(refused(good) == "accepted");
}

TEST_CASE("tls: a run over TLS: 3 peers join, all-reduce and sync shared state, a stranger is refused", "[tls]") {
  ferry::master::MasterServerOptions options;
  options.listen_host = "127.0.0.1";
  options.listen_port = 0;
  options.transport = net::make_tls_transport(pki().config("b"));
  ferry::master::MasterServer master(options);
  master.start();
  auto config = [&](const std::string& who, const std::string& ca) {
    ferry::peer::CommConfig c;
    c.master = {"127.0.0.1", master.port()};
    c.listen_host = "127.0.0.1";
    c.connections = 3;
    c.io_threads = 1;
    c.timeout = 10s;
    c.progress_timeout = 10s;
    c.heartbeat_timeout = 5s;
    c.max_chunk_bytes = 64 << 10;
    c.transport = net::make_tls_transport(pki().config(who, ca));
    return c;
  };

  const size_t peers = 3, count = (1 << 20) + 3;
  std::vector<std::string> problems(peers);
  std::vector<std::thread> threads;
  for (size_t who = 0; who < peers; ++who)
    threads.emplace_back([&, who] {
      try {
        ferry::peer::Communicator comm(config(who % 2 ? "a" : "b", "ca"));
        comm.connect();
        while (comm.attributes().group_world < static_cast<int64_t>(peers)) {
          comm.update_topology();
          std::this_thread::sleep_for(5ms);
        }
        auto rank = static_cast<size_t>(comm.attributes().rank);
        // An all-reduce: chunks over 3 blocking TLS lanes per link, with odd tails.
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i + rank) % 1000);
        auto op = comm.allreduce_async(data.data(), data.data(), count, ferry::peer::AllreduceSpec{});
        if (Status st = op->wait(nullptr); !st.ok()) throw ferry::Error(st.code, st.message);
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (size_t r = 0; r < peers; ++r) want += static_cast<float>((i + r) % 1000);
          if (data[i] != want) throw std::runtime_error("wrong sum at " + std::to_string(i));
        }
        // A shared-state sync: the fetch path reads and writes one TLS stream from one thread.
        std::vector<float> weights(300000, rank == 0 ? 7.0f : 0.0f);
        ferry::peer::SyncSpec spec;
        spec.revision = rank == 0 ? 1 : 0;
        spec.strategy = rank == 0 ? wire::SyncStrategy::send_only : wire::SyncStrategy::receive_only;
        spec.compression_level = rank == 2 ? 1 : 0;
        spec.tensors.push_back({"w", weights.data(), weights.size(), ferry::DType::f32, false});
        auto sync = comm.sync_shared_state(spec);
        if (Status st = sync->wait(nullptr); !st.ok()) throw ferry::Error(st.code, st.message);
        if (weights.front() != 7.0f || weights.back() != 7.0f) throw std::runtime_error("shared state not fetched");
      } catch (const std::exception& e) {
        problems[who] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& p : problems) CHECK(p == "");

  // A peer whose certificate another CA signed never reaches the master's protocol.
  Errc refused = Errc::ok;
  try {
    ferry::peer::Communicator stranger(config("rogue", "both-ca"));
    stranger.connect();
  } catch (const ferry::Error& e) {
    refused = e.code();
    INFO(e.what());
  }
  CHECK(refused == Errc::auth);
}
