// Communicator::sync_shared_state and the serving side of other peers' syncs:
// the state is hashed with no lock held, then issued like any collective (one
// snapshot with the issue, begin to the master); a FetchHello (from a
// fetcher, or from a holder that dials its fetcher) is handed to the sync it names (peer/shared_state_sync.h).
#include "net/frame_io.h"
#include "peer/communicator.h"
#include "peer/fetch_connect.h"

namespace ferry::peer {

std::shared_ptr<SharedStateSync> Communicator::sync_shared_state(SyncSpec spec) {
  {
    std::lock_guard lock(state_.mu);
    if (!state_.master_away("sync_shared_state")) state_.require_accepted("sync_shared_state");
  }
  if (spec.connections == 0) spec.connections = config_.connections ? config_.connections : kStartLanes;
  // Hashing happens first, with no lock held: it may take a while for large states.
  HashedState state = HashedState::of(std::move(spec));
  std::shared_ptr<SharedStateSync> op;
  std::optional<Status> no_master;
  {
    std::lock_guard lock(state_.mu);  // with the issue: one snapshot (communicator.h)
    no_master = state_.master_away("sync_shared_state");
    if (!no_master) state_.require_accepted("sync_shared_state");
    op = ops_->issue<SharedStateSync>(
        [&](uint64_t epoch, uint32_t seq) {
          return std::make_shared<SharedStateSync>(
              *ops_, epoch, seq, state_.peer_id, std::move(state), op_deadlines(), fetch_connector());
        },
        nullptr);
  }
  begin_issued(*op, no_master, [&] { session_.send(op->begin_message()); });
  return op;
}

FetchConnector Communicator::fetch_connector() {
  return {.dial = [this](const wire::PeerAddress& to, const wire::FetchHello& hello, std::shared_ptr<net::Stream>& out) {
            return dial_fetch_peer(io_.get_executor(), link_options_, to, hello, out);
          },
          .punch = [this](const wire::PeerAddress& to, const wire::FetchHello& hello, uint32_t k, bool holder,
                          std::shared_ptr<net::Stream>& out) {
            return punch_fetch_peer(io_.get_executor(), link_options_, to, hello, k, holder, out);
          },
          .holder_wait = 2 * link_options_.timeout};
}

void Communicator::on_fetch_hello(const wire::FetchHello& hello, const std::string& welcome_proof,
                                  const std::shared_ptr<net::Stream>& stream) {
  auto op = std::dynamic_pointer_cast<SharedStateSync>(ops_->find(hello.epoch, hello.seq));
  uint64_t self;
  {
    std::lock_guard lock(state_.mu);
    self = state_.peer_id;
  }
  if (op && hello.acceptor() == self) return op->serve(hello, welcome_proof, stream);
  net::write_one_message(stream,
                         wire::LinkWelcome{.code = static_cast<uint32_t>(Errc::protocol),
                                           .reason = "no such shared-state sync here"},
                         [stream](Status) { stream->close(); });
}

}  // namespace ferry::peer
