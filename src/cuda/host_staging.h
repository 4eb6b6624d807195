// Device tensors of the C API staged through host memory: the narrow
// interface capi/ calls in a build with CUDA (FERRY_WITH_CUDA). No CUDA
// header here, so capi/ compiles with the host compiler alone.
//
// Ordering: a stage is made after the work the caller enqueued on its stream
// (an event recorded there, waited by ferry's own stream for the device);
// every copy runs on ferry's stream, into pinned host buffers taken from a
// bounded pool and reused; copy_out makes the caller's stream wait on an event
// after ferry's copy, so the caller's stream never waits for anything else.
// Thread-safety: a DeviceStage is used by one thread at a time (it may move
// between threads); the pool and ferry's streams are shared under a lock.
// Only in a build with CUDA (target ferry_cuda).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.h"

namespace ferry::device {

// Ok when `device_index` names a CUDA device of this process and `pointer`
// is memory CUDA can copy from on it (device or managed memory). Otherwise
// invalid_argument after `what` ("desc->device (send)", ...): "no CUDA
// device: <cuda's error>", or why the index or pointer is wrong.
Status check_device_pointer(const void* pointer, int device_index, const char* what);

class DeviceStage {
 public:
  // A pinned host buffer of `bytes` from the pool; `caller_stream` is a
  // cudaStream_t (nullptr: the legacy default stream). Records an event on
  // the caller's stream and makes ferry's stream wait on it: everything this
  // stage enqueues runs after the caller's work so far. Throws Error (system).
  DeviceStage(int device_index, void* caller_stream, size_t bytes);
  // Waits (on this host thread) for ferry's copies, then returns the buffer.
  ~DeviceStage();
  DeviceStage(const DeviceStage&) = delete;
  DeviceStage& operator=(const DeviceStage&) = delete;

  uint8_t* host() const { return host_; }
  size_t size() const { return bytes_; }

  // Enqueues on ferry's stream the copy of bytes [offset, offset + n) from `device_src` into host() + offset.
  Status copy_in(const void* device_src, size_t offset, size_t n);
  // content_hash_many's block hashes of `n` bytes at `device_src`, computed on
  // the device on ferry's stream; waits for them (a few bytes per 4 MiB).
  Status block_hashes(const void* device_src, size_t n, std::vector<uint64_t>& out);
  // Waits (on this host thread) until the copies in have landed in host().
  Status wait();
  // Enqueues the copy of host() + [offset, offset + n) to `device_dst` on
  // ferry's stream and makes the caller's stream wait for it (an event).
  Status copy_out(void* device_dst, size_t offset, size_t n);

 private:
  int device_ = 0;
  void* caller_stream_ = nullptr;  // cudaStream_t
  void* ferry_stream_ = nullptr;   // cudaStream_t, ferry's for device_
  void* done_ = nullptr;           // cudaEvent_t, reused for each ordering point
  uint8_t* host_ = nullptr;        // pinned, from the pool
  size_t bytes_ = 0;
};

}  // namespace ferry::device
