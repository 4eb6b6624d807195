// Device buffers of the C API (ferry_device): checked, then staged through
// pinned host memory by src/cuda/host_staging.h in a build with CUDA; refused
// with invalid_argument ("this libferry was built without CUDA") otherwise.
// peer/ only ever sees the host copies.
// Thread-safety: a StagedBuffer is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ferry::device {
class DeviceStage;
}

namespace ferry::capi {

// Throws invalid_argument unless `device` (a ferry_device, as an int) is
// FERRY_DEVICE_CPU, or FERRY_DEVICE_CUDA with this build and process able to
// reach device `index` and `pointer` (may be NULL) on it. `where` names the
// caller's field ("desc->device", "state->tensors[2]").
void check_device(int device, int index, const void* pointer, const std::string& where);

// `bytes` of a device buffer staged in pinned host memory (CUDA builds only;
// elsewhere the constructor throws as check_device does).
class StagedBuffer {
 public:
  // Copies `bytes` from `device_src` after the work enqueued on `stream` so
  // far, and waits until they are in host(). With `hash`, also computes the
  // content hash's block hashes on the device (block_hashes()).
  StagedBuffer(int index, void* stream, const void* device_src, size_t bytes, bool hash);
  ~StagedBuffer();
  StagedBuffer(const StagedBuffer&) = delete;
  StagedBuffer& operator=(const StagedBuffer&) = delete;

  uint8_t* host() const;
  std::vector<uint64_t>& block_hashes() { return block_hashes_; }
  // Copies host() to `device_dst`; the caller's stream waits for the copy, the call does not.
  void deliver(void* device_dst);

 private:
  std::unique_ptr<device::DeviceStage> stage_;
  size_t bytes_ = 0;
  std::vector<uint64_t> block_hashes_;
};

}  // namespace ferry::capi
