#include "net/punch.h"

#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "core/duration_text.h"

namespace ferry::net {

uint64_t punch_key(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint64_t part : parts) {  // splitmix64 over each part in turn
    h = (h ^ part) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  return h;
}

uint16_t punch_port(PunchUse use, uint64_t key, uint32_t slot, int end) {
  struct Block {
    uint32_t first, slots;  // two ports a slot
  };
  const Block block = use == PunchUse::ring_link ? Block{61000, 1500} : Block{64000, 768};
  const uint32_t start = static_cast<uint32_t>(key % block.slots);
  return static_cast<uint16_t>(block.first + ((start + slot) % block.slots) * 2 + (end != 0 ? 1 : 0));
}

namespace {

constexpr std::chrono::milliseconds kRetryAfterRefusal{50};
using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

// Both sides of one end: a socket that connects from the local port, again after each
// refusal, and a listener on the same port (SO_REUSEPORT) that takes the far end's SYN
// when it arrives while no connect is out. Where a firewall lets the two SYNs meet, the
// kernel makes them one connection on the connecting socket; on an open network (or
// loopback, where a refusal comes back at once and the two connects rarely overlap) the
// far end's SYN finds the listener. Either way the 4-tuple is one connection, and each
// end takes whichever of its two sockets holds it.
struct PunchAttempt : std::enable_shared_from_this<PunchAttempt> {
  PunchAttempt(asio::any_io_executor ex, std::shared_ptr<Transport> t, StreamReady d)
      : strand(asio::make_strand(ex)), socket(strand), acceptor(strand), deadline(strand), pause(strand),
        transport(std::move(t)), done(std::move(d)) {}

  void start(std::chrono::milliseconds timeout) {
    deadline.expires_after(timeout);
    deadline.async_wait([self = shared_from_this(), timeout](std::error_code ec) {
      if (ec || self->finished) return;
      self->fail(Errc::timeout, "no simultaneous open within " + ms(timeout) +
                                    (self->last_error.empty() ? "" : " (last attempt: " + self->last_error + ")"));
    });
    std::error_code ec;
    acceptor.open(remote.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.set_option(ReusePort(true), ec);
    if (!ec) acceptor.bind({any_address(), local_port}, ec);
    if (!ec) acceptor.listen(1, ec);
    if (ec) return fail(Errc::connect, "cannot listen on port " + std::to_string(local_port) + ": " + ec.message());
    accept();
    attempt();
  }

  asio::ip::address any_address() const {
    return remote.address().is_v6() ? asio::ip::address(asio::ip::address_v6::any())
                                     : asio::ip::address(asio::ip::address_v4::any());
  }

  void accept() {
    acceptor.async_accept([self = shared_from_this()](std::error_code ec, asio::ip::tcp::socket peer) {
      if (self->finished || self->connected) return;
      if (ec) return;  // closed: the connecting socket won, or the attempt ended
      std::error_code remote_ec;
      if (peer.remote_endpoint(remote_ec) != self->remote || remote_ec) {
        std::error_code ignored;
        peer.close(ignored);  // not the far end: a stranger on this port
        return self->accept();
      }
      self->connected = true;
      std::error_code ignored;
      self->socket.close(ignored);
      self->pause.cancel();
      self->socket = std::move(peer);
      self->open_transport();
    });
  }

  void attempt() {
    std::error_code ec;
    socket = asio::ip::tcp::socket(strand);
    socket.open(remote.protocol(), ec);
    if (!ec) socket.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) socket.set_option(ReusePort(true), ec);
    if (!ec) socket.bind({any_address(), local_port}, ec);
    if (ec) return fail(Errc::connect, "cannot bind port " + std::to_string(local_port) + ": " + ec.message());
    socket.async_connect(remote, [self = shared_from_this()](std::error_code ec2) {
      if (self->finished || self->connected) return;
      if (ec2) {
        // Refused or reset: the far end's socket was not there yet. Again, from the same port.
        self->last_error = ec2.message();
        std::error_code ignored;
        self->socket.close(ignored);
        self->pause.expires_after(kRetryAfterRefusal);
        return self->pause.async_wait([self](std::error_code e) {
          if (!e && !self->finished && !self->connected) self->attempt();
        });
      }
      self->connected = true;
      std::error_code ignored;
      self->acceptor.close(ignored);
      self->open_transport();
    });
  }

  void open_transport() {
    if (Status tuned = apply_tuning(socket, tuning); !tuned.ok()) return fail(tuned.code, tuned.message);
    auto self = shared_from_this();
    auto opened = [self](Status st, std::shared_ptr<Stream> stream) {
      asio::dispatch(self->strand, [self, st, stream] {
        if (self->finished) {
          if (stream) stream->close();
          return;
        }
        self->finished = true;
        self->deadline.cancel();
        if (!st.ok()) return self->done(st, nullptr);
        self->done(Status::success(), stream);
      });
    };
    if (client)
      transport->open_client(std::move(socket), opened);
    else
      transport->open_server(std::move(socket), opened);
  }

  void fail(Errc code, const std::string& why) {
    finished = true;
    deadline.cancel();
    pause.cancel();
    std::error_code ignored;
    socket.close(ignored);
    acceptor.close(ignored);
    auto d = std::move(done);
    const std::string where = remote.address().to_string() + ":" + std::to_string(remote.port());
    asio::post(strand, [d, code, msg = "cannot punch through to " + where + " from port " +
                                       std::to_string(local_port) + ": " + why] {
      d(Status::failure(code, msg), nullptr);
    });
  }

  asio::strand<asio::any_io_executor> strand;
  asio::ip::tcp::socket socket;
  asio::ip::tcp::acceptor acceptor;
  asio::steady_timer deadline, pause;
  std::shared_ptr<Transport> transport;
  StreamReady done;
  SocketTuning tuning;
  asio::ip::tcp::endpoint remote;
  uint16_t local_port = 0;
  bool client = true;
  bool connected = false;  // one of the two sockets holds the connection: the other stops
  bool finished = false;
  std::string last_error;
};

}  // namespace

void punch(asio::any_io_executor executor, uint16_t local_port, const Endpoint& remote,
           std::chrono::milliseconds timeout, std::shared_ptr<Transport> transport, bool client, StreamReady done,
           SocketTuning tuning) {
  auto attempt = std::make_shared<PunchAttempt>(executor, std::move(transport), std::move(done));
  attempt->tuning = std::move(tuning);
  attempt->local_port = local_port;
  attempt->client = client;
  std::error_code ec;
  const asio::ip::address address = asio::ip::make_address(remote.host, ec);
  asio::dispatch(attempt->strand, [attempt, timeout, ec, address, remote] {
    if (ec) return attempt->fail(Errc::connect, "'" + remote.host + "' is not a numeric address");
    attempt->remote = {address, remote.port};
    attempt->start(timeout);
  });
}

}  // namespace ferry::net
