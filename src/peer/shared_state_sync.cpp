#include "peer/shared_state_sync.h"

#include <pthread.h>
#include <zstd.h>

#include <algorithm>
#include <numeric>

#include "core/content_hash.h"
#include "core/hash.h"
#include "core/log.h"
#include "peer/escaped_exception.h"
#include "wire/fetch_frames.h"
#include "wire/frame.h"

namespace ferry::peer {
namespace {

// Large enough to keep a connection busy between requests, small enough that a
// failed holder costs little to refetch and work spreads over every holder.
// One chunk is one block of the content hash, so a chunk's checksum is that
// block's hash: holders serve the hashes they computed for the election, and a
// fetcher verifies a whole tensor from its verified chunks' hashes, with no
// second pass over the bytes.
constexpr uint32_t kFetchChunkBytes = 4u << 20;
static_assert(kFetchChunkBytes == kContentHashBlock);
constexpr size_t kRequestsInFlight = 4;  // per connection

struct ZstdContexts {
  ZSTD_CCtx* compress = ZSTD_createCCtx();
  ZSTD_DCtx* decompress = ZSTD_createDCtx();
  ~ZstdContexts() {
    ZSTD_freeCCtx(compress);
    ZSTD_freeDCtx(decompress);
  }
};

ZstdContexts& zstd() {
  thread_local ZstdContexts contexts;
  return contexts;
}

}  // namespace

HashedState HashedState::of(SyncSpec spec) {
  HashedState h;
  h.spec = std::move(spec);
  const auto& tensors = h.spec.tensors;
  if (tensors.size() > wire::kMaxSharedTensors)
    throw Error(Errc::invalid_argument, "at most " + std::to_string(wire::kMaxSharedTensors) + " shared tensors");
  h.order.resize(tensors.size());
  std::iota(h.order.begin(), h.order.end(), size_t{0});
  std::sort(h.order.begin(), h.order.end(), [&](size_t a, size_t b) { return tensors[a].name < tensors[b].name; });
  for (size_t i = 0; i < h.order.size(); ++i) {
    const auto& t = tensors[h.order[i]];
    if (t.name.empty() || t.name.size() > wire::kMaxTensorName)
      throw Error(Errc::invalid_argument, "shared tensor names must be 1.." + std::to_string(wire::kMaxTensorName) + " bytes");
    if (i > 0 && tensors[h.order[i - 1]].name == t.name)
      throw Error(Errc::invalid_argument, "two shared tensors are named '" + t.name + "'");
  }
  // Hash the tensors that must agree, on every core at once.
  std::vector<std::pair<const void*, size_t>> buffers;
  std::vector<size_t> hashed;
  h.hashes.assign(h.order.size(), 0);
  h.own_blocks.resize(h.order.size());
  for (size_t c = 0; c < h.order.size(); ++c) {
    const auto& t = tensors[h.order[c]];
    if (t.allow_inequality) continue;
    const size_t size = t.count * dtype_size(t.dtype);
    if (t.block_hashes) {  // hashed on its device already
      if (t.block_hashes->size() != std::max<size_t>(1, (size + kContentHashBlock - 1) / kContentHashBlock))
        throw Error(Errc::internal, "shared tensor '" + t.name + "': block hashes do not match its size");
      h.hashes[c] = content_hash_from_blocks(*t.block_hashes, size);
      h.own_blocks[c] = *t.block_hashes;
      continue;
    }
    buffers.emplace_back(t.data, size);
    hashed.push_back(c);
  }
  std::vector<uint64_t> digests(buffers.size());
  std::vector<std::vector<uint64_t>> blocks;
  content_hash_many(buffers, digests, 0, &blocks);
  for (size_t k = 0; k < hashed.size(); ++k) {
    h.hashes[hashed[k]] = digests[k];
    h.own_blocks[hashed[k]] = std::move(blocks[k]);
  }
  return h;
}

SharedStateSync::SharedStateSync(OpHost& host, uint64_t epoch, uint32_t seq, uint64_t self_id, HashedState state,
                                 OpDeadlines deadlines, FetchConnector connector)
    : CollectiveOp(host, epoch, seq, deadlines), self_id_(self_id), spec_(std::move(state.spec)),
      connector_(std::move(connector)), order_(std::move(state.order)), hashes_(std::move(state.hashes)),
      own_blocks_(std::move(state.own_blocks)), changed_(spec_.tensors.size(), false) {}

SharedStateSync::~SharedStateSync() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) {
    if (t.get_id() == std::this_thread::get_id())
      t.detach();  // the last reference went with one of our own threads, at its very end
    else if (t.joinable())
      t.join();
  }
}

uint8_t* SharedStateSync::tensor_bytes(uint32_t canonical) const {
  return static_cast<uint8_t*>(spec_.tensors[order_[canonical]].data);
}

size_t SharedStateSync::tensor_size(uint32_t canonical) const {
  const auto& t = spec_.tensors[order_[canonical]];
  return t.count * dtype_size(t.dtype);
}

uint64_t SharedStateSync::chunk_checksum(uint32_t canonical, uint64_t offset, uint32_t length) const {
  const auto& blocks = own_blocks_[canonical];
  const uint64_t block = offset / kContentHashBlock;
  if (offset % kContentHashBlock == 0 && block < blocks.size() &&
      length == std::min<uint64_t>(kContentHashBlock, tensor_size(canonical) - offset))
    return blocks[block];
  return hash_bytes(tensor_bytes(canonical) + offset, length);
}

wire::SyncBegin SharedStateSync::begin_message() const {
  wire::SyncBegin b;
  b.epoch = epoch();
  b.seq = seq();
  b.revision = spec_.revision;
  b.strategy = static_cast<uint8_t>(spec_.strategy);
  b.connections = spec_.connections;
  for (size_t c = 0; c < order_.size(); ++c) {
    const auto& t = spec_.tensors[order_[c]];
    b.tensors.push_back({.name = t.name,
                         .dtype = static_cast<uint8_t>(t.dtype),
                         .count = t.count,
                         .hash = hashes_[c],
                         .allow_inequality = t.allow_inequality});
  }
  return b;
}

// --- the plan ------------------------------------------------------------------------

void SharedStateSync::plan(const wire::SyncPlan& plan) {
  if (!begin_running()) return;
  // Check the plan against what we declared before acting on it.
  std::vector<FetchChunk> chunks;
  for (const auto& f : plan.fetches) {
    if (f.tensor >= order_.size() || spec_.tensors[order_[f.tensor]].allow_inequality || f.holders.empty())
      return fail_local(Status::failure(Errc::protocol, "the master's shared-state plan names a tensor this peer cannot fetch"));
    size_t size = tensor_size(f.tensor);
    for (uint64_t offset = 0; offset < size || (size == 0 && offset == 0); offset += kFetchChunkBytes) {
      chunks.push_back({f.tensor, offset, static_cast<uint32_t>(std::min<uint64_t>(kFetchChunkBytes, size - offset)),
                        f.holders});
      if (size == 0) break;
    }
  }
  if (plan.holder_dials.size() > plan.addresses.size())
    return fail_local(Status::failure(Errc::protocol, "the master's shared-state plan names more dials than holders"));
  fetched_blocks_.resize(order_.size());
  for (const auto& f : plan.fetches)
    fetched_blocks_[f.tensor].resize(std::max<size_t>(1, (tensor_size(f.tensor) + kContentHashBlock - 1) / kContentHashBlock));
  std::vector<Arrival> early;
  {
    std::lock_guard lock(mu_);
    plan_ = plan;
    queue_ = std::make_unique<FetchQueue>(std::move(chunks));
    early.swap(early_arrivals_);
  }
  for (auto& a : early) arrived(std::move(a));
  // Fetchers this holder connects to itself (it accepts no connection from them).
  for (const auto& fetcher : plan.serve_dials)
    for (uint32_t k = 0; k < std::min<uint32_t>(fetcher.connections, wire::kMaxFetchConnections); ++k)
      spawn([this, fetcher, k] { serve_opened(fetcher, k); });
  if (plan.fetches.empty()) return mark_local_done();  // nothing to fetch; maybe still serving others

  // Connections: `connections` per holder, at most kMaxFetchConnections in all.
  const size_t holders = plan.addresses.size();
  if (holders == 0) return fail_local(Status::failure(Errc::protocol, "shared-state plan without holder addresses"));
  const uint32_t per_holder = wire::fetch_connections_per_holder(spec_.connections, holders);
  fetchers_running_ = per_holder * holders;
  // Few chunks: smaller batches, so that every connection gets some (8 chunks
  // over 4 connections in batches of 4 would leave two idle).
  batch_chunks_ = std::clamp<size_t>(queue_->size() / (per_holder * holders), 1, kRequestsInFlight);
  for (uint32_t k = 0; k < per_holder; ++k)
    for (size_t h = 0; h < holders; ++h) {
      wire::PeerAddress a = plan.addresses[h];
      spawn([this, a, dial = plan.holder_dial(h), k] { fetch_loop(a, dial, k); });
    }
}

// --- fetching --------------------------------------------------------------------------

void SharedStateSync::fetch_loop(const wire::PeerAddress& address, wire::FetchDial dial, uint32_t k) {
  pthread_setname_np(pthread_self(), "ferry-fetch");
  const uint64_t holder = address.peer_id;
  std::shared_ptr<net::Stream> stream;
  Status st = connect_holder(address, dial, k, stream);
  std::vector<uint8_t> scratch;
  std::vector<size_t> batch;
  if (st.ok() && stream) {
    track(stream);
    progressed();
    while (st.ok()) {
      batch = queue_->take(holder, batch_chunks_);
      if (batch.empty()) break;
      st = fetch_batch(*stream, batch, scratch);
      if (st.ok()) batch.clear();
    }
    stream->abort();
  }
  if (!st.ok()) {
    log().warn("shared state: holder {} failed: {}", holder, st.message);
    queue_->holder_failed(holder, batch);
  }
  bool last = fetchers_running_.fetch_sub(1) == 1;
  std::string which;
  if (!queue_->complete() && queue_->stranded(&which))
    return fail_local(Status::failure(Errc::peer_lost, "no live holder left for " + which + ": " + st.message));
  if (last) fetched_all();
}

Status SharedStateSync::fetch_batch(net::Stream& stream, const std::vector<size_t>& batch, std::vector<uint8_t>& scratch) {
  // Requests first (they are small), then the answers in the same order: the connection never idles between chunks.
  std::vector<std::array<uint8_t, wire::kFetchRequestBytes>> requests;
  std::vector<asio::const_buffer> buffers;
  for (size_t id : batch) {
    const FetchChunk& c = queue_->chunk(id);
    requests.push_back(wire::encode_fetch_request({c.tensor, c.offset, c.length, spec_.compression_level}));
  }
  for (auto& r : requests) buffers.push_back(asio::buffer(r));
  for (size_t i = 0; i < buffers.size(); i += 4)
    if (auto ec = stream.write_all_blocking({buffers.data() + i, std::min<size_t>(4, buffers.size() - i)}))
      return Status::failure(Errc::peer_lost, "fetch request: " + ec.message());
  for (size_t id : batch) {
    const FetchChunk& c = queue_->chunk(id);
    std::array<uint8_t, wire::kFetchResponseBytes> head{};
    if (auto ec = stream.read_exact_blocking(asio::buffer(head)))
      return Status::failure(Errc::peer_lost, "fetch response: " + ec.message());
    wire::FetchResponse r;
    if (!wire::decode_fetch_response(head.data(), r) || r.tensor != c.tensor || r.offset != c.offset ||
        r.raw_length != c.length || r.compressed > 1 || (!r.compressed && r.wire_length != r.raw_length) ||
        r.wire_length > ZSTD_compressBound(r.raw_length))
      return Status::failure(Errc::protocol, "malformed fetch response");
    uint8_t* dst = tensor_bytes(c.tensor) + c.offset;
    if (!r.compressed) {
      if (auto ec = stream.read_exact_blocking(asio::buffer(dst, r.raw_length)))
        return Status::failure(Errc::peer_lost, "fetch data: " + ec.message());
    } else {
      scratch.resize(r.wire_length);
      if (auto ec = stream.read_exact_blocking(asio::buffer(scratch)))
        return Status::failure(Errc::peer_lost, "fetch data: " + ec.message());
      size_t n = ZSTD_decompressDCtx(zstd().decompress, dst, r.raw_length, scratch.data(), scratch.size());
      if (ZSTD_isError(n) || n != r.raw_length) return Status::failure(Errc::protocol, "corrupt zstd frame in a fetch");
    }
    const uint64_t checksum = hash_bytes(dst, r.raw_length);
    if (checksum != r.checksum) return Status::failure(Errc::protocol, "a fetched chunk failed its checksum");
    fetched_blocks_[c.tensor][c.offset / kContentHashBlock] = checksum;  // this chunk's own slot
    bytes_received_ += wire::kFetchResponseBytes + r.wire_length;
    queue_->done(id);
    progressed();
  }
  return Status::success();
}

void SharedStateSync::fetched_all() {
  if (!queue_->complete()) return;  // a failure is being reported instead
  // Count a tensor only when all of it hashes to the winner: never a torn tensor reported as synced.
  // Every block was hashed as it landed (fetch_batch); chunks never overlap, so those hashes still hold.
  for (const auto& f : plan_->fetches) {
    if (content_hash_from_blocks(fetched_blocks_[f.tensor], tensor_size(f.tensor)) != f.hash)
      return fail_local(Status::failure(Errc::protocol, "fetched tensor '" + spec_.tensors[order_[f.tensor]].name +
                                                            "' does not hash to the elected content"));
    changed_[order_[f.tensor]] = true;
  }
  mark_local_done();
}

// --- serving (the connections: shared_state_connect.cpp) -------------------------------------

void SharedStateSync::serve_loop(const std::shared_ptr<net::Stream>& stream) {
  pthread_setname_np(pthread_self(), "ferry-serve");
  std::vector<uint8_t> compressed;
  for (;;) {
    std::array<uint8_t, wire::kFetchRequestBytes> bytes{};
    if (stream->read_exact_blocking(asio::buffer(bytes))) break;  // the fetcher is done (or gone)
    wire::FetchRequest req;
    bool valid = wire::decode_fetch_request(bytes.data(), req) && req.tensor < order_.size() &&
                 !spec_.tensors[order_[req.tensor]].allow_inequality && req.length <= wire::kMaxFetchChunk &&
                 req.offset <= tensor_size(req.tensor) && req.length <= tensor_size(req.tensor) - req.offset &&
                 req.compression <= static_cast<uint32_t>(ZSTD_maxCLevel());
    if (!valid) {
      log().warn("shared state: dropped a malformed fetch request");
      break;
    }
    const uint8_t* data = tensor_bytes(req.tensor) + req.offset;
    wire::FetchResponse resp{.tensor = req.tensor,
                             .offset = req.offset,
                             .raw_length = req.length,
                             .wire_length = req.length,
                             .checksum = chunk_checksum(req.tensor, req.offset, req.length)};
    const uint8_t* payload = data;
    if (req.compression > 0 && req.length > 0) {
      compressed.resize(ZSTD_compressBound(req.length));
      size_t n = ZSTD_compressCCtx(zstd().compress, compressed.data(), compressed.size(), data, req.length,
                                   static_cast<int>(req.compression));
      if (!ZSTD_isError(n) && n < req.length) {  // only when it pays
        resp.compressed = 1;
        resp.wire_length = static_cast<uint32_t>(n);
        payload = compressed.data();
      }
    }
    auto head = wire::encode_fetch_response(resp);
    std::array<asio::const_buffer, 2> out{asio::buffer(head), asio::buffer(payload, resp.wire_length)};
    if (stream->write_all_blocking(out)) break;
    bytes_sent_ += head.size() + resp.wire_length;
    progressed();
  }
  stream->abort();
}

// --- threads, streams, the end ------------------------------------------------------------

void SharedStateSync::spawn(std::function<void()> body) {
  if (!try_hold()) return;
  // A transfer that throws, or a thread the system refuses, fails this sync
  // with the reason: never std::terminate, never a hold that is not given back.
  try {
    std::lock_guard lock(mu_);
    threads_.emplace_back([self = shared_from_this(), body = std::move(body)]() mutable {
      {
        // Destroyed here, before the release: no socket of ours outlives the
        // collective (and with it, possibly, the communicator's io_context).
        auto run = std::move(body);
        try {
          run();
        } catch (...) {
          self->fail_local(status_of_current_exception("a shared-state transfer failed"));
        }
      }
      self->release();
    });
  } catch (...) {
    fail_local(status_of_current_exception("cannot start a shared-state transfer thread"));
    release();
  }
}

void SharedStateSync::track(const std::shared_ptr<net::Stream>& stream) {
  bool stopped;
  {
    std::lock_guard lock(mu_);
    stopped = stopped_;
    streams_.push_back(stream);
  }
  if (stopped) stream->abort();
}

void SharedStateSync::stop_transfers(const Status&) {
  std::vector<std::weak_ptr<net::Stream>> streams;
  std::vector<Arrival> early;
  FetchQueue* queue = nullptr;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    streams = streams_;
    early.swap(early_arrivals_);
    queue = queue_.get();
  }
  holder_opened_.notify_all();
  for (auto& w : streams)
    if (auto s = w.lock()) s->abort();
  for (auto& f : early) f.stream->close();
  if (queue) queue->close();
}

void SharedStateSync::on_verdict(const Status& verdict) {
  // Serving ends with the sync, whatever the outcome: fetchers that are not done by now never will be.
  stop_transfers(verdict);
}

std::optional<uint64_t> SharedStateSync::planned_revision() {
  std::lock_guard lock(mu_);
  return plan_ ? std::optional<uint64_t>(plan_->revision) : std::nullopt;
}

Status SharedStateSync::wait(SyncOutcome* outcome) {
  Status verdict = wait_finished();
  if (outcome) {
    outcome->revision = verdict.ok() && plan_ ? plan_->revision : spec_.revision;
    outcome->bytes_sent = bytes_sent_.load();
    outcome->bytes_received = bytes_received_.load();
    outcome->changed = changed_;
    outcome->duration_s = timeline().duration_s;
  }
  return verdict;
}

}  // namespace ferry::peer
