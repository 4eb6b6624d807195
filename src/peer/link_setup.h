// Builds the links of one proposed ring: `lanes` connections to the next
// peer (the data goes there) and as many from the previous peer, each
// handshaken (link_hello -> link_welcome), all within a deadline. Each link
// is dialed by whichever end the master chose (Topology::receiver_dials,
// master/link_dialers.h): usually its sender; its receiver when the sender
// cannot reach it (behind NAT, an inbound firewall, dial_out_only). The
// result is a started RingLinks, or the peer to blame. A neighbour that was
// to dial this peer and is not heard from at all by its dial's connect
// timeout (plus a grace) is blamed then, not at the whole deadline: its
// dial has failed by then. A link neither end can dial is punched
// (wire::LinkDial::both, net/punch.h): both ends connect at once from the
// lane's agreed ports; the sender then says the link hello and its receiver
// answers, as over a dialed lane.
//
// A lane whose two ends share a host (net/host_identity.h) carries its bytes
// through a shared-memory ring the dialer offers in its hello; any failure to
// make or map one leaves that lane on its connection, which works everywhere.
// The ring's writer makes it, so a link its receiver dials stays on TCP, and
// it does not grow (lane_tuner.h: the sender, which measures, would dial).
//
// Threading: offer_inbound() and cancel() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "net/shm_ring.h"
#include "peer/link_options.h"
#include "peer/ring_links.h"
#include "wire/messages.h"

namespace ferry::peer {

class LinkSetup : public std::enable_shared_from_this<LinkSetup> {
 public:
  struct Outcome {
    Status status;
    std::shared_ptr<RingLinks> links;  // set on success
    uint64_t unreachable_peer = 0;     // on failure: whom to blame, when known
  };
  using Done = std::function<void(Outcome)>;

  // `resume`: where the last links to the same next peer settled (lane_tuner.h).
  LinkSetup(asio::any_io_executor executor, LinkOptions options, uint64_t self_id, const wire::Topology& topology,
            Done done, SettledLink resume = {});

  // When a previous peer never heard from is blamed (after the proposal arrives).
  static std::chrono::milliseconds silent_link_deadline(const LinkOptions& options) {
    return std::min(options.timeout, options.connect_timeout + kInboundGrace);
  }

  void start();
  // A connection from some peer said link_hello (handshake checked). True when
  // it belongs to this ring (it is then welcomed and kept); false leaves it to the caller.
  bool offer_inbound(const wire::LinkHello& hello, const std::string& welcome_proof,
                     const std::shared_ptr<net::Stream>& stream);
  void cancel(const Status& why);
  uint64_t epoch() const { return topology_.epoch; }

 private:
  // How long after its dial's connect timeout the previous peer's first lane may still arrive.
  static constexpr std::chrono::milliseconds kInboundGrace{5'000};

  void arm_timer();
  // `whole`: the set-up's timeout passed; else only the first lane's, with nothing heard.
  void deadline_passed(bool whole, std::chrono::milliseconds waited);
  // `outgoing`: a lane of the link to the next peer (this peer dials it forward), else of
  // the link from the previous one (dialed here for its receiver).
  void dial_lane(bool outgoing, uint32_t lane);
  // A lane this peer dialed or punched towards `target_id` failed: blame it, or this peer when
  // out of local resources.
  void lane_failed(uint64_t target_id, const Status& st);
  // One lane of a punched link: of the link to the next peer when `outgoing`, else from the previous one.
  void punch_lane(bool outgoing, uint32_t lane);
  // One lane of a relayed link: this end's hop to the relay, then the transport through it.
  void relay_lane(bool outgoing, uint32_t lane);
  // A punched or relayed lane (`how`) is open end to end: the sender says the link hello,
  // the receiver checks it and welcomes (welcome_opened).
  void greet_opened(bool outgoing, uint32_t lane, std::shared_ptr<net::Stream> stream, wire::LinkDial how);
  void welcome_opened(uint32_t lane, std::shared_ptr<net::Stream> stream, wire::LinkDial how);
  // Whether this peer opens the link's lanes itself (dials, punches or relays them), else waits for them.
  bool opens_out() const { return dials_out_ || punch_out_ || relay_out_; }
  bool opens_in() const { return dials_in_ || punch_in_ || relay_in_; }
  // Whether every lane the neighbours dial to this peer is up.
  bool accepted_lanes_up() const;
  // The inbound stream as this lane will use it: over the hello's ring when it maps.
  std::shared_ptr<net::Stream> accept_ring(const wire::LinkHello& hello, const std::shared_ptr<net::Stream>& stream);
  // How the started links may dial further lanes (ring_links.h).
  LaneGrowth growth(uint32_t lanes) const;
  void lane_ready(bool outgoing, uint32_t lane, std::shared_ptr<net::Stream> stream, bool shared_memory);
  // A lane this peer dialed failed: finish now, or once the lanes it accepts are up.
  void dial_failed(Outcome outcome);
  void finish(Outcome outcome);

  asio::any_io_executor executor_;
  const LinkOptions options_;
  const uint64_t self_id_;
  const wire::Topology topology_;
  const SettledLink resume_;
  uint32_t rank_ = 0;
  wire::RingMember next_, prev_;
  bool dials_out_ = true;   // this peer dials its link to next_ (else next_ dials it)
  bool dials_in_ = false;   // this peer dials its link from prev_ (else prev_ dials it)
  bool punch_out_ = false;  // its link to next_ is punched from both ends (then dials_out_ is false)
  bool punch_in_ = false;   // its link from prev_ is punched from both ends
  bool relay_out_ = false;  // its link to next_ goes through a relay (Topology::relays)
  bool relay_in_ = false;   // its link from prev_ does
  asio::strand<asio::any_io_executor> strand_;
  asio::steady_timer timer_;  // only on strand_
  std::mutex mu_;
  Done done_;                                        // guarded by mu_; null once finished
  std::vector<std::shared_ptr<net::Stream>> out_, in_;  // guarded by mu_
  size_t out_ready_ = 0, in_ready_ = 0;              // guarded by mu_
  SharedMemoryLanes shared_memory_;       // guarded by mu_
  std::optional<Outcome> dial_failure_;  // guarded by mu_; reported once the accepted lanes are up
};

}  // namespace ferry::peer
