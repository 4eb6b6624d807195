// A relay's splice alone (net/relay_splice.h): two neighbours' raw connections
// joined, bytes both ways intact and counted; with TLS between the neighbours,
// end to end through it, the relay sees no byte of the plaintext it carries.
#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "io_thread.h"
#include "net/relay_splice.h"
#include "net/transport.h"
#include "tls_loopback.h"

using namespace ferry;
using namespace std::chrono_literals;

namespace {

// A connected pair on loopback: `outer` a neighbour's end, `inner` the relay's.
struct Pair {
  asio::ip::tcp::socket outer, inner;
};

Pair connected(asio::io_context& io, asio::ip::tcp::acceptor& acceptor) {
  asio::ip::tcp::socket outer(io), inner(io);
  outer.connect(acceptor.local_endpoint());
  acceptor.accept(inner);
  return {std::move(outer), std::move(inner)};
}

std::shared_ptr<net::Stream> open(std::shared_ptr<net::Transport> transport, asio::ip::tcp::socket socket,
                                  bool client) {
  std::promise<std::pair<Status, std::shared_ptr<net::Stream>>> opened;
  auto ready = [&opened](Status st, std::shared_ptr<net::Stream> s) { opened.set_value({st, s}); };
  if (client)
    transport->open_client(std::move(socket), ready);
  else
    transport->open_server(std::move(socket), ready);
  // Runs on a thread of the test's too: it throws (the future carries it to the test's
  // thread) rather than assert, as Catch's assertions are the test thread's alone.
  auto future = opened.get_future();
  if (future.wait_for(10s) != std::future_status::ready) throw std::runtime_error("the transport did not open");
  auto [st, stream] = future.get();
  if (!st.ok()) throw std::runtime_error("the transport failed to open: " + st.message);
  stream->enter_blocking_mode();
  return stream;
}

// A recognisable plaintext: the same 16-byte pattern over and over.
std::vector<uint8_t> pattern(size_t size) {
  const std::string unit = "ferry-plaintext!";
  std::vector<uint8_t> out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(unit[i % unit.size()]);
  return out;
}

bool contains(const std::vector<uint8_t>& haystack, const std::vector<uint8_t>& needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
}

}  // namespace

TEST_CASE("relay splice: both directions arrive intact and counted, and TLS end to end leaves the relay ciphertext only",
          "[relay][tls]") {
  const bool tls = GENERATE(false, true);
  INFO("tls " << tls);
  test::TestPki pki;
  auto client_transport = tls ? net::make_tls_transport(pki.config("a")) : net::make_tcp_transport();
  auto server_transport = tls ? net::make_tls_transport(pki.config("b")) : net::make_tcp_transport();
  test::IoThread io;
  asio::ip::tcp::acceptor acceptor(io.io, {asio::ip::make_address("127.0.0.1"), 0});
  Pair a = connected(io.io, acceptor), b = connected(io.io, acceptor);

  std::mutex mu;
  std::vector<uint8_t> seen;  // everything the relay forwarded, both ways
  std::promise<net::SpliceCounts> ended;
  auto splice = net::RelaySplice::start(
      std::move(a.inner), std::move(b.inner), [&](net::SpliceCounts c) { ended.set_value(c); },
      [&](bool, const uint8_t* data, size_t size) {
        std::lock_guard lock(mu);
        seen.insert(seen.end(), data, data + size);
      });
  // The neighbours' transport runs through the splice: a is the client, b the server.
  auto server = std::async(std::launch::async, [&] { return open(server_transport, std::move(b.outer), false); });
  auto client = open(client_transport, std::move(a.outer), true);
  auto served = server.get();

  const auto sent = pattern(3 << 20);
  std::vector<uint8_t> received(sent.size());
  auto reader = std::async(std::launch::async, [&] { return served->read_exact_blocking(asio::buffer(received)); });
  std::array<asio::const_buffer, 1> out{asio::buffer(sent)};
  REQUIRE_FALSE(client->write_all_blocking(out));
  REQUIRE_FALSE(reader.get());
  CHECK(received == sent);
  // And back.
  const auto reply = pattern(1000);
  std::vector<uint8_t> got(reply.size());
  std::array<asio::const_buffer, 1> back{asio::buffer(reply)};
  REQUIRE_FALSE(served->write_all_blocking(back));
  REQUIRE_FALSE(client->read_exact_blocking(asio::buffer(got)));
  CHECK(got == reply);

  // One side closes: the splice ends, both counts at least what the neighbours sent.
  client->abort();
  auto counts = ended.get_future();
  REQUIRE(counts.wait_for(10s) == std::future_status::ready);
  const net::SpliceCounts c = counts.get();
  CHECK(c.a_to_b >= sent.size());
  CHECK(c.b_to_a >= reply.size());
  std::lock_guard lock(mu);
  const std::vector<uint8_t> probe(sent.begin(), sent.begin() + 64);
  CHECK(contains(seen, probe) == !tls);  // plain: the relay could read it; TLS: it never sees it
  served->abort();
}

TEST_CASE("relay splice: stop() ends it and closes both neighbours' connections", "[relay]") {
  test::IoThread io;
  asio::ip::tcp::acceptor acceptor(io.io, {asio::ip::make_address("127.0.0.1"), 0});
  Pair a = connected(io.io, acceptor), b = connected(io.io, acceptor);
  std::promise<net::SpliceCounts> ended;
  auto splice = net::RelaySplice::start(std::move(a.inner), std::move(b.inner),
                                        [&](net::SpliceCounts c) { ended.set_value(c); });
  splice->stop();
  auto counts = ended.get_future();
  REQUIRE(counts.wait_for(10s) == std::future_status::ready);
  CHECK(counts.get().a_to_b == 0);
  // The neighbours see their connections end (EOF or reset), not silence.
  std::array<uint8_t, 1> byte{};
  std::error_code ec;
  a.outer.read_some(asio::buffer(byte), ec);
  CHECK(ec);
  b.outer.read_some(asio::buffer(byte), ec);
  CHECK(ec);
}
