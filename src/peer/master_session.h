// This peer's connection to the master: the dial, the mutual proof of the
// run secret (the master speaks first: challenge -> hello -> welcome),
// heartbeats, and the dispatch of what the master says to Events.
//
// Threading: open() blocks the caller (bounded by the dial's deadline); send,
// leave and close from any thread. Events run on the connection's strand, one
// at a time, with no lock of this class held. mu_ guards the handshake state.
// A session may be opened again once its connection closed (a member dialing
// a master started again): events of an earlier connection are dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <asio/any_io_executor.hpp>

#include "core/run_secret.h"
#include "net/endpoint.h"
#include "net/frame_connection.h"
#include "net/transport.h"
#include "wire/messages.h"

namespace ferry::peer {

class MasterSession {
 public:
  // What the master tells this peer. A failure ends the session (and, for the
  // communicator, the peer): kicked, refused, a protocol violation or a lost master.
  class Events {
   public:
    virtual ~Events() = default;
    virtual void on_welcome(uint64_t peer_id) = 0;
    virtual void on_topology(const wire::Topology& topology) = 0;
    virtual void on_topology_done(const wire::TopologyDone& done) = 0;
    virtual void on_pending_count(uint32_t pending) = 0;
    virtual void on_collective_go(const wire::CollectiveGo& go) = 0;
    virtual void on_sync_plan(const wire::SyncPlan& plan) = 0;
    virtual void on_gather_go(const wire::GatherGo& go) = 0;
    virtual void on_collective_result(const wire::CollectiveResult& result) = 0;
    virtual void on_collective_pending(const wire::CollectivePending& pending) = 0;
    virtual void on_call_refused(const wire::CallRefused& refused) = 0;
    virtual void on_link_matrix(wire::LinkMatrix& matrix) = 0;
    virtual void on_probe_round(const wire::ProbeRound& round) = 0;
    virtual void on_session_failed(const Status& why) = 0;
    // The master said it is going away for good (wire::GoingAway): no redial can
    // bring it back. `why` is master_lost. The close that follows still comes to
    // on_session_failed.
    virtual void on_master_gone(const Status& why) = 0;
  };

  struct Options {
    net::Endpoint master;
    std::chrono::milliseconds timeout{60'000};            // the dial
    std::chrono::milliseconds heartbeat_timeout{10'000};  // silence after which the master is lost
    std::shared_ptr<net::Transport> transport;
    std::shared_ptr<const RunSecret> secret;  // null: the run is not authenticated
  };

  MasterSession(asio::any_io_executor executor, Options options, Events& events);

  // What open() throws when nothing took the connection (refused,
  // unreachable, no answer in time): a master that may not be up yet.
  struct Unanswered : Error {
    Unanswered(Errc code, const std::string& what, bool name_resolved) : Error(code, what), resolved(name_resolved) {}
    bool resolved;  // false: the master's name did not resolve (nothing was dialed)
  };

  // What open() throws when `abandon` turned true while it dialed (the communicator died:
  // aborted, destroyed); the dial itself ends in the background at its deadline.
  struct Abandoned : Error {
    Abandoned() : Error(Errc::invalid_usage, "the dial to the master was abandoned") {}
  };

  // Dials the master (at most `dial_timeout`, or options.timeout); `hello`
  // goes out once its challenge is in. Throws Unanswered when nothing took
  // the connection, Error(connect or auth, ...) when the transport's handshake
  // failed, Error(invalid_usage, ...) while a connection is open, Abandoned
  // within kAbandonCheck of `abandon` (when given) turning true.
  void open(wire::Hello hello, std::optional<std::chrono::milliseconds> dial_timeout = std::nullopt,
            const std::atomic<bool>* abandon = nullptr);
  static constexpr std::chrono::milliseconds kAbandonCheck{50};
  // Queues a message for the master; dropped once the session closed.
  template <class M>
  void send(const M& message) {
    if (auto connection = connection_of()) connection->send(message);
  }
  // Says goodbye and closes, so the master drops this peer at once.
  void leave();
  void close(const Status& why);
  // Waits until the connection has closed or the deadline; true when closed (or never opened).
  bool wait_closed(std::chrono::steady_clock::time_point deadline);

 private:
  std::shared_ptr<net::FrameConnection> connection_of() const;
  void on_message(uint64_t generation, wire::Message message);
  void on_closed(uint64_t generation, const Status& why);
  void on_challenge(const wire::AuthChallenge& challenge);
  void on_welcome(const wire::Welcome& welcome);
  void fail(const Status& why) { events_.on_session_failed(why); }
  bool current(uint64_t generation) const;

  asio::any_io_executor executor_;
  const Options options_;
  Events& events_;
  // The master speaks first on every connection: a close before its first message means it never worked.
  std::atomic<bool> heard_from_master_{false};

  mutable std::mutex mu_;
  std::condition_variable closed_cv_;
  std::shared_ptr<net::FrameConnection> connection_;  // guarded by mu_; set by open()
  std::optional<wire::Hello> hello_;  // guarded by mu_; until the challenge: the hello to send; then: its nonce
  bool hello_sent_ = false;           // guarded by mu_
  std::string master_nonce_;          // guarded by mu_; the challenge's
  bool closed_ = false;               // guarded by mu_
  uint64_t generation_ = 0;           // guarded by mu_; connections opened so far
};

}  // namespace ferry::peer
