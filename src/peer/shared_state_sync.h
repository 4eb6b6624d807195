// One shared-state sync in flight (master/shared_state_election.h has the
// rules). This peer hashes its tensors, tells the master, and follows the
// plan it gets back: it fetches the tensors whose bytes lost the election
// from the peers that hold the winning bytes — chunks spread over every
// holder and several connections each, optionally zstd-compressed, each chunk
// checksummed — and serves its own winning tensors to the peers the plan
// names. Each connection is opened by whichever end the other can reach
// (wire::FetchDial, peer/fetch_connect.h): a holder that accepts no
// connection dials its fetchers, or the two punch through. A fetched tensor counts only once its content hash matches the
// winner's; a holder that fails hands its chunks to another holder.
//
// Threads: one per fetch connection and one per served connection, each
// blocking on its socket; all of them hold the collective open (holds) until
// they exit, so the caller's tensors are never touched after wait() returns.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "net/stream.h"
#include "peer/collective_op.h"
#include "peer/fetch_queue.h"

namespace ferry::peer {

struct SharedTensor {
  std::string name;
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::f32;
  bool allow_inequality = false;
  // Set when the bytes at `data` were hashed elsewhere (a device tensor staged
  // through host memory, hashed on its device): content_hash_many's block
  // hashes of those bytes, used instead of hashing them again.
  std::optional<std::vector<uint64_t>> block_hashes = std::nullopt;
};

struct SyncSpec {
  uint64_t revision = 0;
  wire::SyncStrategy strategy = wire::SyncStrategy::enforce_popular;
  uint32_t compression_level = 0;  // zstd level asked of holders; 0: raw bytes
  uint32_t connections = 4;        // per holder
  std::vector<SharedTensor> tensors;
};

struct SyncOutcome {
  uint64_t revision = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;  // on the wire (compressed when compressed)
  std::vector<bool> changed;                    // per tensor, in the caller's order
  double duration_s = 0;
};

// Opens fetch connections (peer/fetch_connect.h); each call returns a welcomed stream in
// blocking mode. Supplied by the communicator (it owns transports and deadlines).
struct FetchConnector {
  // Dials `to` (a holder, or a fetcher when the holder opens), says the hello, waits for the welcome.
  std::function<Status(const wire::PeerAddress& to, const wire::FetchHello&, std::shared_ptr<net::Stream>& out)> dial;
  // Connection `k` of a punched fetch, from the holder's side (`holder`) or the fetcher's.
  std::function<Status(const wire::PeerAddress& to, const wire::FetchHello&, uint32_t k, bool holder,
                       std::shared_ptr<net::Stream>& out)>
      punch;
  // How long a fetcher waits for a connection its holder opens: as long as that holder's dial may take.
  std::chrono::milliseconds holder_wait{120'000};
};

// A sync's tensors, checked and hashed: all the work a sync does before it
// takes its number (hashing a large state takes a while; no lock is held).
struct HashedState {
  SyncSpec spec;
  std::vector<size_t> order;                    // canonical (name order) -> index into spec.tensors
  std::vector<uint64_t> hashes;                 // by canonical index; 0 for tensors that may differ
  std::vector<std::vector<uint64_t>> own_blocks;  // by canonical index: block hashes of the bytes at the call
  // Hashes every tensor (all cores); throws Error(invalid_argument) on a bad spec.
  static HashedState of(SyncSpec spec);
};

class SharedStateSync final : public CollectiveOp, public std::enable_shared_from_this<SharedStateSync> {
 public:
  SharedStateSync(OpHost& host, uint64_t epoch, uint32_t seq, uint64_t self_id, HashedState state,
                  OpDeadlines deadlines, FetchConnector connector);
  ~SharedStateSync() override;

  wire::SyncBegin begin_message() const;
  void plan(const wire::SyncPlan& plan) override;
  // A fetch_hello for this sync arrived on `stream` (handshake read, nothing outstanding):
  // a fetcher dialed this holder, or a holder that accepts no connection dialed this fetcher.
  void serve(const wire::FetchHello& hello, const std::string& welcome_proof, std::shared_ptr<net::Stream> stream);
  Status wait(SyncOutcome* outcome);
  // The revision the master elected (every member's after a commit); none before the plan.
  std::optional<uint64_t> planned_revision();

 private:
  const char* call_name() const override { return "sync_shared_state"; }
  void stop_transfers(const Status& why) override;
  void on_verdict(const Status& verdict) override;
  struct Arrival {  // a connection the other end opened, handshake read
    wire::FetchHello hello;
    std::string welcome_proof;
    std::shared_ptr<net::Stream> stream;
  };
  void arrived(Arrival arrival);  // with the plan
  void start_serving(Arrival fetcher);
  void take_holders_connection(Arrival holder);
  void serve_loop(const std::shared_ptr<net::Stream>& stream);
  void serve_opened(const wire::ServeDial& fetcher, uint32_t k);
  Status connect_holder(const wire::PeerAddress& holder, wire::FetchDial dial, uint32_t k,
                        std::shared_ptr<net::Stream>& out);
  void fetch_loop(const wire::PeerAddress& holder, wire::FetchDial dial, uint32_t k);
  Status fetch_batch(net::Stream& stream, const std::vector<size_t>& batch, std::vector<uint8_t>& scratch);
  void fetched_all();
  void spawn(std::function<void()> body);  // a thread holding the collective open
  void track(const std::shared_ptr<net::Stream>& stream);
  uint8_t* tensor_bytes(uint32_t canonical) const;
  size_t tensor_size(uint32_t canonical) const;
  // The chunk's XXH3-64: the election's block hash when it is a whole block, else hashed now.
  uint64_t chunk_checksum(uint32_t canonical, uint64_t offset, uint32_t length) const;

  const uint64_t self_id_;
  SyncSpec spec_;
  const FetchConnector connector_;
  const std::vector<size_t> order_;                      // see HashedState
  const std::vector<uint64_t> hashes_;                   // see HashedState
  const std::vector<std::vector<uint64_t>> own_blocks_;  // see HashedState
  // By canonical index, for the tensors we fetch: each block's hash, verified as
  // it landed. Sized by plan() before any fetcher starts; each chunk writes its own slot.
  std::vector<std::vector<uint64_t>> fetched_blocks_;

  std::mutex mu_;
  std::optional<wire::SyncPlan> plan_;                       // guarded by mu_
  std::unique_ptr<FetchQueue> queue_;                        // set once by plan()
  std::vector<Arrival> early_arrivals_;                      // before our plan; guarded by mu_
  // Connections holders opened to this fetcher, not yet taken by a fetch thread, and how
  // many each holder opened in all; guarded by mu_, waited on with holder_opened_.
  std::map<uint64_t, std::vector<std::shared_ptr<net::Stream>>> opened_by_holder_;
  std::map<uint64_t, size_t> holder_opened_count_;
  std::condition_variable holder_opened_;
  std::vector<std::weak_ptr<net::Stream>> streams_;          // every live connection; guarded by mu_
  std::vector<std::thread> threads_;                         // guarded by mu_
  bool stopped_ = false;                                     // guarded by mu_
  std::vector<bool> changed_;                                // by caller's index; written before local done
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0};
  std::atomic<size_t> fetchers_running_{0};
  size_t batch_chunks_ = 1;  // chunks requested at once per connection; set by plan() before any fetcher starts
};

}  // namespace ferry::peer
