// DeviceStage: ferry's stream per device, the pinned buffer pool, events.
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/content_hash.h"
#include "cuda/cuda_status.h"
#include "cuda/device_codecs.h"
#include "cuda/host_staging.h"

namespace ferry::device {
namespace {

void throw_if_failed(cudaError_t error, const char* what) {
  Status status = cuda_status(error, what);
  if (!status.ok()) throw Error(status.code, status.message);
}

// Makes `device` current on this thread for the guard's life (CUDA calls act on the current device).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    (void)cudaGetDevice(&before_);
    throw_if_failed(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceScope() { (void)cudaSetDevice(before_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int before_ = 0;
};

// Lock order: each mutex below is a leaf (no other lock is taken while it is held).
std::mutex streams_mu;
std::vector<cudaStream_t> ferry_streams;  // by device; created once, live as long as the process; guarded by streams_mu

// ferry's stream for the current device: non-blocking, so it never
// synchronizes with the legacy default stream the caller may be using.
cudaStream_t ferry_stream(int device) {
  std::lock_guard lock(streams_mu);
  if (ferry_streams.size() <= static_cast<size_t>(device)) ferry_streams.resize(device + 1, nullptr);
  if (!ferry_streams[device])
    throw_if_failed(cudaStreamCreateWithFlags(&ferry_streams[device], cudaStreamNonBlocking), "cudaStreamCreate");
  return ferry_streams[device];
}

// Pinned host buffers kept for reuse: at most kPoolBuffers, each reused for
// requests from half its size up to its size.
constexpr size_t kPoolBuffers = 8;
std::mutex pool_mu;
std::vector<std::pair<size_t, void*>> pool;  // free buffers (size, pointer); guarded by pool_mu

uint8_t* take_pinned(size_t bytes) {
  const size_t want = std::max<size_t>(bytes, 1);
  {
    std::lock_guard lock(pool_mu);
    auto best = pool.end();
    for (auto it = pool.begin(); it != pool.end(); ++it)
      if (it->first >= want && it->first / 2 <= want && (best == pool.end() || it->first < best->first)) best = it;
    if (best != pool.end()) {
      void* p = best->second;
      pool.erase(best);
      return static_cast<uint8_t*>(p);
    }
  }
  void* p = nullptr;
  throw_if_failed(cudaHostAlloc(&p, want, cudaHostAllocPortable), "cudaHostAlloc (pinned staging buffer)");
  return static_cast<uint8_t*>(p);
}

// Keeps the buffer unless the pool is full, then frees the smallest.
void give_pinned(uint8_t* p, size_t bytes) {
  void* dropped = nullptr;
  {
    std::lock_guard lock(pool_mu);
    pool.emplace_back(std::max<size_t>(bytes, 1), p);
    if (pool.size() > kPoolBuffers) {
      auto smallest = std::min_element(pool.begin(), pool.end());
      dropped = smallest->second;
      pool.erase(smallest);
    }
  }
  if (dropped) (void)cudaFreeHost(dropped);
}

}  // namespace

Status check_device_pointer(const void* pointer, int device_index, const char* what) {
  int count = 0;
  if (cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::failure(Errc::invalid_argument, std::string(what) + ": no CUDA device: " +
                                                       cuda_status(error, "cudaGetDeviceCount").message);
  }
  if (count == 0)
    return Status::failure(Errc::invalid_argument, std::string(what) + ": no CUDA device: cudaGetDeviceCount found 0");
  if (device_index < 0 || device_index >= count)
    return Status::failure(Errc::invalid_argument, std::string(what) + " is " + std::to_string(device_index) +
                                                       "; this process sees CUDA devices 0.." + std::to_string(count - 1));
  if (!pointer) return Status::success();
  cudaPointerAttributes attributes{};
  if (cudaError_t error = cudaPointerGetAttributes(&attributes, pointer); error != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::failure(Errc::invalid_argument, std::string(what) + ": " +
                                                       cuda_status(error, "cudaPointerGetAttributes").message);
  }
  if (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)
    return Status::failure(Errc::invalid_argument, std::string(what) + " names CUDA device " +
                                                       std::to_string(device_index) + " but the buffer is not device memory");
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != device_index)
    return Status::failure(Errc::invalid_argument, std::string(what) + " is " + std::to_string(device_index) +
                                                       " but the buffer is on CUDA device " + std::to_string(attributes.device));
  return Status::success();
}

DeviceStage::DeviceStage(int device_index, void* caller_stream, size_t bytes)
    : device_(device_index), caller_stream_(caller_stream), bytes_(bytes) {
  DeviceScope scope(device_);
  ferry_stream_ = ferry_stream(device_);
  cudaEvent_t event = nullptr;
  throw_if_failed(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  done_ = event;
  Status st = cuda_status(cudaEventRecord(event, static_cast<cudaStream_t>(caller_stream_)), "cudaEventRecord (caller's stream)");
  if (st.ok())
    st = cuda_status(cudaStreamWaitEvent(static_cast<cudaStream_t>(ferry_stream_), event, 0), "cudaStreamWaitEvent (ferry's stream)");
  if (!st.ok()) {
    (void)cudaEventDestroy(event);
    throw Error(st.code, st.message);
  }
  try {
    host_ = take_pinned(bytes_);
  } catch (...) {
    (void)cudaEventDestroy(event);
    throw;
  }
}

DeviceStage::~DeviceStage() {
  try {
    DeviceScope scope(device_);
    // The pinned buffer goes back to the pool only once no copy reads or writes it.
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(ferry_stream_));
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(done_));
  } catch (...) {  // a device that cannot be made current: nothing of ours runs on it
  }
  give_pinned(host_, bytes_);
}

Status DeviceStage::copy_in(const void* device_src, size_t offset, size_t n) {
  if (n == 0) return Status::success();
  DeviceScope scope(device_);
  return cuda_status(cudaMemcpyAsync(host_ + offset, static_cast<const uint8_t*>(device_src) + offset, n,
                                     cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(ferry_stream_)),
                     "cudaMemcpyAsync to the staging buffer");
}

Status DeviceStage::block_hashes(const void* device_src, size_t n, std::vector<uint64_t>& out) {
  DeviceScope scope(device_);
  const size_t blocks = std::max<size_t>(1, (n + kContentHashBlock - 1) / kContentHashBlock);
  out.assign(blocks, 0);
  auto stream = static_cast<cudaStream_t>(ferry_stream_);
  // Stream-ordered scratch: cudaMalloc/cudaFree would wait for the whole device, the caller's streams included.
  uint64_t* hashes = nullptr;
  Status st = cuda_status(cudaMallocAsync(reinterpret_cast<void**>(&hashes), blocks * sizeof(uint64_t), stream),
                          "cudaMallocAsync (block hashes)");
  if (!st.ok()) return st;
  st = content_block_hashes(device_src, n, hashes, stream);
  if (st.ok())
    st = cuda_status(cudaMemcpyAsync(out.data(), hashes, blocks * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream),
                     "cudaMemcpyAsync of the block hashes");
  (void)cudaFreeAsync(hashes, stream);
  Status waited = cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize (ferry's stream)");
  return st.ok() ? waited : st;
}

Status DeviceStage::wait() {
  DeviceScope scope(device_);
  return cuda_status(cudaStreamSynchronize(static_cast<cudaStream_t>(ferry_stream_)), "cudaStreamSynchronize (ferry's stream)");
}

Status DeviceStage::copy_out(void* device_dst, size_t offset, size_t n) {
  if (n == 0) return Status::success();
  DeviceScope scope(device_);
  auto stream = static_cast<cudaStream_t>(ferry_stream_);
  auto event = static_cast<cudaEvent_t>(done_);
  Status st = cuda_status(cudaMemcpyAsync(static_cast<uint8_t*>(device_dst) + offset, host_ + offset, n,
                                          cudaMemcpyHostToDevice, stream),
                          "cudaMemcpyAsync from the staging buffer");
  if (st.ok()) st = cuda_status(cudaEventRecord(event, stream), "cudaEventRecord (ferry's stream)");
  if (st.ok())
    st = cuda_status(cudaStreamWaitEvent(static_cast<cudaStream_t>(caller_stream_), event, 0),
                     "cudaStreamWaitEvent (caller's stream)");
  return st;
}

}  // namespace ferry::device
