// This peer relaying ring lanes for two other members of its group that can
// neither dial nor punch through to each other (wire::LinkDial::relay; the
// master chooses relays in master/relay_choice.h). Both ends of each lane dial
// the relay port and say a relay_hello, authenticated like every p2p hello
// (peer/relay_hop.h); once both have come and a topology this peer received
// names it the relay of that link, each is welcomed and the two connections
// are spliced (net/relay_splice.h). From then on the relay forwards bytes both
// ways and reads none: the neighbours run the run's transport (TLS) and their
// link hello end to end through it, so a relay sees only ciphertext under TLS
// and cannot alter a lane undetected.
//
// Why a listener of its own: the p2p listener opens the run's transport on
// every connection (a TLS server), and a relay must not end the neighbours' TLS.
// Bounds: the listener's stranger caps (net/stranger_gate.h) until a hello is
// proved; then at most kMaxWaitingEnds ends wait at once, each at most the
// link timeout (then refused: "the other end did not come"). A splice ends
// when either end closes (a new ring, a failure), and with stop().
//
// Threading: every member from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/steady_timer.hpp>

#include "net/listener.h"
#include "net/relay_splice.h"
#include "net/tcp_stream.h"
#include "peer/link_options.h"
#include "wire/messages.h"

namespace ferry::peer {

class RelayService : public std::enable_shared_from_this<RelayService> {
 public:
  static constexpr size_t kMaxWaitingEnds = 1024;
  // The relays of this many of the latest rings are kept: a lane of a ring some
  // members already left for a newer one still finds its relay.
  static constexpr size_t kRememberedRings = 4;

  struct Counts {
    uint64_t lanes = 0;  // spliced now
    uint64_t bytes = 0;  // forwarded, both directions, since start (lanes still open included)
  };

  // Listens on `host` at any free port. Throws Error as net::Listener::bind does.
  static std::shared_ptr<RelayService> start(asio::any_io_executor executor, const std::string& host,
                                             LinkOptions options, uint64_t fd_limit);
  uint16_t port() const { return listener_->port(); }
  // The relayed links of a proposed ring that name `self` as their relay.
  void expect(const wire::Topology& topology, uint64_t self);
  Counts counts();
  void stop();

  RelayService(asio::any_io_executor executor, LinkOptions options);  // use start()

 private:
  using LinkKey = std::tuple<uint64_t, uint64_t, uint64_t>;            // epoch, sender, receiver
  using LaneKey = std::tuple<uint64_t, uint64_t, uint64_t, uint32_t>;  // and the lane
  struct End {
    std::shared_ptr<net::TcpStream> stream;
    std::string welcome_proof;
    std::shared_ptr<asio::steady_timer> deadline;  // refuses it when the other end does not come
  };
  struct Waiting {
    uint32_t lanes = 0;
    End ends[2];  // [0]: the sender's, [1]: the receiver's
  };

  void on_hello(const wire::RelayHello& hello, End end);
  // The waiting lanes that may be joined now (both ends there, the link expected); under mu_.
  std::vector<std::pair<End, End>> take_ready_locked();
  // Two ends welcomed in turn, then spliced (both welcomes written, both sockets out of their streams).
  struct Joining {
    std::mutex mu;
    std::optional<asio::ip::tcp::socket> sockets[2];
    int written = 0;
    bool failed = false;
    std::shared_ptr<net::TcpStream> streams[2];
  };
  void join(End sender, End receiver);
  void welcomed(const std::shared_ptr<Joining>& joining, int side, const Status& st);
  void give_up(const LaneKey& key, int side, const std::shared_ptr<net::TcpStream>& stream);
  static void refuse(const std::shared_ptr<net::Stream>& stream, const std::string& why);

  asio::any_io_executor executor_;
  const LinkOptions options_;
  std::shared_ptr<net::Listener> listener_;
  std::mutex mu_;
  std::map<LinkKey, uint32_t> expected_;  // guarded by mu_: lanes of each link this peer relays
  std::map<LaneKey, Waiting> waiting_;    // guarded by mu_
  size_t waiting_ends_ = 0;               // guarded by mu_
  std::vector<std::weak_ptr<net::RelaySplice>> splices_;  // guarded by mu_
  bool stopped_ = false;                                  // guarded by mu_
  std::atomic<uint64_t> lanes_{0}, bytes_{0};
};

}  // namespace ferry::peer
