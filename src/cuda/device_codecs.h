// ferry's codecs on a CUDA device: the per-hop u8 / i8 / u4 encoder
// (quant.h), the integer-domain block maxima and encoders (int_quant.h) and
// the shared-state content hash (content_hash.h), each giving the same bytes
// as the CPU function it names for the same input (NaN, inf, -0, subnormals
// and partial last blocks included), so CPU and GPU peers can share a run.
// Each kernel's arithmetic is a core shared with the CPU tests (host_device.h).
//
// Pointers named `device` are device memory (cudaMalloc, or managed); the
// functions enqueue their work on `stream` (a cudaStream_t; nullptr is the
// legacy default stream) and return once it is enqueued, unless they say they
// synchronize. The caller keeps every buffer alive and unchanged until the
// stream has passed the work. Errors come back as a Status: invalid_argument
// for a spec or mode the device does not do (the caller's bug), system for a
// CUDA error (its name and text in the message).
// Thread-safety: reentrant; any thread may call, on any stream.
// Only in a build with CUDA (FERRY_CUDA, target ferry_cuda).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/int_quant.h"
#include "core/quant.h"

namespace ferry::device {

// The number of CUDA devices the driver shows; 0 when there is no driver, no
// device, or the runtime fails to start (never throws).
int device_count();
// "1 device: NVIDIA H200 (sm_90)", or why there is none ("no CUDA device:
// cudaGetDeviceCount: cudaErrorNoDevice (no CUDA-capable device is detected)").
std::string device_summary();
inline bool cuda_available() { return device_count() > 0; }

// quant_encode(spec, src, count, dst) for spec.kind u8, i8 or u4 (others:
// invalid_argument): dst receives quant_encoded_bytes<T>(spec, count) bytes.
// T is float or double.
template <class T>
Status quant_encode(QuantSpec spec, const T* src_device, size_t count, uint8_t* dst_device, void* stream);

// int_quant_absmax: absmax_device holds the whole tensor's
// int_quant_block_count(spec, first_index + count) maxima (at least), merged
// into as on the CPU.
template <class T>
Status int_quant_absmax(IntQuantSpec spec, const T* x_device, size_t count, size_t first_index, T* absmax_device,
                        void* stream);

// int_quant_encode: out receives int_quant_packed_bytes(spec, count, 1) bytes.
template <class T>
Status int_quant_encode(IntQuantSpec spec, uint64_t contributor, const T* absmax_device, size_t first_index,
                        const T* x_device, size_t count, uint8_t* out_device, void* stream);

// The XXH3-64 of each kContentHashBlock block of the buffer, in order (one
// block for an empty buffer): content_hash_many's block hashes.
// block_hashes_device has room for max(1, ceil(size / kContentHashBlock)).
Status content_block_hashes(const void* data_device, size_t size, uint64_t* block_hashes_device, void* stream);

// content_hash(data, size), computed on the device: enqueues the block hashes,
// waits for the stream, and folds them on the host (content_hash_from_blocks,
// a few bytes). Blocks the caller until the stream has passed the work.
Status content_hash(const void* data_device, size_t size, void* stream, uint64_t* hash);

// Device memory for tests and tools: a cudaMalloc'd buffer, freed with the
// object. Throws ferry::Error (system) when CUDA fails.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(other.size_) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  // Synchronous copies (cudaMemcpy) of `bytes` bytes at the buffer's start.
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  std::vector<uint8_t> download_bytes(size_t bytes) const;

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// cudaDeviceSynchronize, as a Status.
Status synchronize();

}  // namespace ferry::device
