// Device tensors through the C API on a GPU: 2 peers in one process (an
// embedded master, tests/integration's harness). An all-reduce of device
// buffers gives the host all-reduce's bytes; a shared-state sync between a
// peer with device tensors and one with host tensors ends bit-identical; the
// caller's stream keeps running while an all-reduce waits for the network.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <cstring>
#include <latch>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/device_codecs.h"
#include "harness.h"

using namespace ferry::test;
using ferry::device::DeviceBuffer;

namespace {

void cuda_must(cudaError_t error, const char* what) {
  if (error != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

// A stream of the caller's: a non-blocking one, or the legacy default stream (nullptr).
struct CallerStream {
  explicit CallerStream(bool legacy) {
    if (!legacy) cuda_must(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~CallerStream() {
    if (stream) (void)cudaStreamDestroy(stream);
  }
  CallerStream(const CallerStream&) = delete;
  CallerStream& operator=(const CallerStream&) = delete;
  void sync() const { cuda_must(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
  cudaStream_t stream = nullptr;
};

// Reproducible f32 data of every magnitude, with -0, subnormals and an odd count.
std::vector<float> input(size_t rank, size_t count, uint64_t salt = 0) {
  std::vector<float> out(count);
  uint64_t state = 0x9E3779B97F4A7C15ULL * (rank + 1) + salt;
  for (size_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    uint32_t bits = static_cast<uint32_t>(state >> 33);
    float x = static_cast<float>(bits & 0xFFFFFF) / 16777216.0f * ((bits & 0x1000000) ? -4.0f : 4.0f);
    std::memcpy(&out[i], &x, sizeof x);
  }
  if (count > 3) {
    out[1] = -0.0f;
    out[2] = 1e-40f;  // subnormal
  }
  return out;
}

std::vector<float> download(const DeviceBuffer& buffer, size_t count) {
  std::vector<float> out(count);
  buffer.download(out.data(), count * sizeof(float));
  return out;
}

bool same_bytes(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cuda capi: an all-reduce of device tensors between 2 peers gives the host all-reduce's bytes",
          "[cuda][capi]") {
  const ferry_quant quant = GENERATE(FERRY_QUANT_NONE, FERRY_QUANT_U8, FERRY_QUANT_I8H);
  const bool legacy_stream = GENERATE(false, true);
  CAPTURE(ferry_quant_name(quant), legacy_stream);
  EmbeddedMaster master;
  const size_t count = (1u << 20) + 37;
  std::vector<std::vector<float>> host_out(2), device_out(2), async_out(2);
  auto outcome = run_peers(2, [&](size_t rank) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    const std::vector<float> in = input(rank, count);
    host_out[rank].resize(count);
    ferry_allreduce_desc desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, quant, 1);
    must(ferry_allreduce(comm, in.data(), host_out[rank].data(), count, &desc, nullptr), "host all-reduce");

    CallerStream caller(legacy_stream);
    DeviceBuffer send(count * sizeof(float)), recv(count * sizeof(float));
    send.upload(in.data(), count * sizeof(float));
    desc.device = FERRY_DEVICE_CUDA;
    desc.device_index = 0;
    desc.cuda_stream = caller.stream;
    desc.tag = 2;
    must(ferry_allreduce(comm, send.data(), recv.data(), count, &desc, nullptr), "device all-reduce");
    caller.sync();
    device_out[rank] = download(recv, count);
    if (!same_bytes(download(send, count), in)) throw std::runtime_error("the device all-reduce wrote send");

    desc.tag = 3;  // in place, asynchronous
    ferry_op* op = nullptr;
    must(ferry_allreduce_async(comm, send.data(), send.data(), count, &desc, &op), "device all-reduce async");
    must(ferry_op_wait(op, nullptr), "ferry_op_wait");
    caller.sync();
    async_out[rank] = download(send, count);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  CHECK(same_bytes(host_out[0], host_out[1]));
  for (size_t rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    CHECK(same_bytes(device_out[rank], host_out[rank]));
    CHECK(same_bytes(async_out[rank], host_out[rank]));
  }
}

TEST_CASE("cuda capi: the caller's stream runs on while a device all-reduce waits for the network", "[cuda][capi]") {
  EmbeddedMaster master;
  const size_t count = 4096;
  std::latch peer_may_call(1);
  std::atomic<int> done_while_stream_ran{-1};
  std::vector<float> result;
  auto outcome = run_peers(2, [&](size_t rank) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    const std::vector<float> in = input(rank, count);
    ferry_allreduce_desc desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM);
    if (rank == 1) {
      peer_may_call.wait();
      std::vector<float> out(count);
      must(ferry_allreduce(comm, in.data(), out.data(), count, &desc, nullptr), "host all-reduce");
    } else {
      CallerStream caller(false);
      DeviceBuffer data(count * sizeof(float)), other(1 << 20);
      data.upload(in.data(), count * sizeof(float));
      desc.device = FERRY_DEVICE_CUDA;
      desc.cuda_stream = caller.stream;
      ferry_op* op = nullptr;
      must(ferry_allreduce_async(comm, data.data(), data.data(), count, &desc, &op), "device all-reduce async");
      // The peer has not called yet, so the op cannot finish; the caller's stream must not wait for it.
      cuda_must(cudaMemsetAsync(other.data(), 1, other.size(), caller.stream), "cudaMemsetAsync");
      caller.sync();
      int done = -1;
      must(ferry_op_test(op, &done), "ferry_op_test");
      done_while_stream_ran = done;
      peer_may_call.count_down();
      must(ferry_op_wait(op, nullptr), "ferry_op_wait");
      caller.sync();
      result = download(data, count);
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  CHECK(done_while_stream_ran == 0);
  const std::vector<float> a = input(0, count), b = input(1, count);
  std::vector<float> sum(count);
  for (size_t i = 0; i < count; ++i) sum[i] = a[i] + b[i];  // two peers: a + b in either order
  CHECK(same_bytes(result, sum));
}

namespace {

// One peer's shared state: its tensors on the device (rank 0) or the host (rank 1).
struct MixedPeer {
  bool on_device = false;
  std::vector<std::vector<float>> host;     // by tensor: the bytes (host peer), or the staging of uploads (device peer)
  std::vector<std::unique_ptr<DeviceBuffer>> device;
  std::vector<ferry_tensor> tensors;
  CallerStream caller{false};

  void set(size_t i, const std::vector<float>& values) {
    host[i] = values;
    if (on_device) device[i]->upload(values.data(), values.size() * sizeof(float));
  }
  std::vector<float> get(size_t i) const { return on_device ? download(*device[i], host[i].size()) : host[i]; }
};

const char* const kNames[] = {"model.weight", "model.bias", "rng"};  // "rng" may differ

}  // namespace

TEST_CASE("cuda capi: a shared-state sync between device tensors and host tensors ends bit-identical",
          "[cuda][capi][shared_state]") {
  EmbeddedMaster master;
  const size_t counts[] = {(3u << 19) + 3, 1001, 64};  // model.weight spans two 4 MiB hash blocks
  std::vector<MixedPeer> peers(2);
  std::vector<std::vector<ferry_sync_info>> infos(2);
  std::vector<std::vector<std::vector<float>>> after(2);  // [rank][round * 3 + tensor]
  auto outcome = run_peers(2, [&](size_t rank) {
    MixedPeer& p = peers[rank];
    p.on_device = rank == 0;
    p.host.resize(3);
    for (size_t i = 0; i < 3; ++i) {
      if (p.on_device) p.device.push_back(std::make_unique<DeviceBuffer>(counts[i] * sizeof(float)));
      ferry_tensor t;
      ferry_tensor_init(&t);
      t.name = kNames[i];
      t.count = counts[i];
      t.allow_content_inequality = i == 2;
      t.device = p.on_device ? FERRY_DEVICE_CUDA : FERRY_DEVICE_CPU;
      p.tensors.push_back(t);
    }
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    auto sync = [&](uint64_t revision, ferry_sync_strategy strategy) {
      for (size_t i = 0; i < 3; ++i)
        p.tensors[i].data = p.on_device ? p.device[i]->data() : static_cast<void*>(p.host[i].data());
      ferry_shared_state s;
      ferry_shared_state_init(&s);
      s.revision = revision;
      s.tensors = p.tensors.data();
      s.count = 3;
      s.cuda_stream = p.caller.stream;
      ferry_sync_info info{};
      info.struct_size = sizeof info;
      must(ferry_sync_shared_state(comm, &s, strategy, &info), "ferry_sync_shared_state");
      p.caller.sync();
      infos[rank].push_back(info);
      for (size_t i = 0; i < 3; ++i) after[rank].push_back(p.get(i));
    };
    // Round 1: the same bytes on both: the device's hash must equal the CPU's, so nothing moves.
    for (size_t i = 0; i < 3; ++i) p.set(i, input(i, counts[i], i == 2 ? rank : 0));
    sync(1, FERRY_SYNC_ENFORCE_POPULAR);
    // Round 2: the device peer's new bytes win; the host peer receives them.
    for (size_t i = 0; i < 3; ++i) p.set(i, input(i + 10 * (rank + 1), counts[i]));
    sync(2, rank == 0 ? FERRY_SYNC_SEND_ONLY : FERRY_SYNC_RECEIVE_ONLY);
    // Round 3: the host peer's new bytes win; the device peer receives them (copied back to its device).
    for (size_t i = 0; i < 3; ++i) p.set(i, input(i + 100 * (rank + 1), counts[i]));
    sync(3, rank == 1 ? FERRY_SYNC_SEND_ONLY : FERRY_SYNC_RECEIVE_ONLY);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  REQUIRE(infos[0].size() == 3);
  REQUIRE(infos[1].size() == 3);
  CHECK(infos[0][0].tensors_changed == 0);
  CHECK(infos[1][0].tensors_changed == 0);
  CHECK(infos[0][1].tensors_changed == 0);
  CHECK(infos[1][1].tensors_changed == 2);
  CHECK(infos[0][2].tensors_changed == 2);
  CHECK(infos[1][2].tensors_changed == 0);
  for (size_t round = 0; round < 3; ++round) {
    for (size_t i = 0; i < 2; ++i) {  // "rng" (i == 2) may differ and is never moved
      CAPTURE(round, kNames[i]);
      CHECK(same_bytes(after[0][round * 3 + i], after[1][round * 3 + i]));
    }
  }
  // The winners' bytes, and "rng" left as each peer set it.
  CHECK(same_bytes(after[1][1 * 3 + 0], input(0 + 10, counts[0])));
  CHECK(same_bytes(after[0][2 * 3 + 0], input(0 + 200, counts[0])));
  CHECK(same_bytes(after[0][2 * 3 + 2], input(2 + 100, counts[2])));
  CHECK(same_bytes(after[1][2 * 3 + 2], input(2 + 200, counts[2])));
}
