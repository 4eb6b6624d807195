// StagedBuffer over ferry::device::DeviceStage, or refusals without CUDA.
#include "capi/device_staging.h"

#include "core/error.h"
#include "ferry/ferry.h"
#if FERRY_WITH_CUDA
#include "cuda/host_staging.h"
#endif

namespace ferry::capi {
namespace {

#if FERRY_WITH_CUDA
void throw_if_failed(const Status& status) {
  if (!status.ok()) throw Error(status.code, status.message);
}
#else
[[noreturn]] void built_without_cuda(const std::string& where) {
  throw Error(Errc::invalid_argument, where + " is FERRY_DEVICE_CUDA but this libferry was built without CUDA");
}
#endif

}  // namespace

void check_device(int device, int index, const void* pointer, const std::string& where) {
  if (device == FERRY_DEVICE_CPU) return;
  if (device != FERRY_DEVICE_CUDA)
    throw Error(Errc::invalid_argument, where + " " + std::to_string(device) + " is not a ferry_device");
#if FERRY_WITH_CUDA
  throw_if_failed(device::check_device_pointer(pointer, index, where.c_str()));
#else
  (void)index;
  (void)pointer;
  built_without_cuda(where);
#endif
}

#if FERRY_WITH_CUDA

StagedBuffer::StagedBuffer(int index, void* stream, const void* device_src, size_t bytes, bool hash)
    : stage_(std::make_unique<device::DeviceStage>(index, stream, bytes)), bytes_(bytes) {
  throw_if_failed(stage_->copy_in(device_src, 0, bytes));
  if (hash) throw_if_failed(stage_->block_hashes(device_src, bytes, block_hashes_));
  throw_if_failed(stage_->wait());
}

StagedBuffer::~StagedBuffer() = default;

uint8_t* StagedBuffer::host() const { return stage_->host(); }

void StagedBuffer::deliver(void* device_dst) { throw_if_failed(stage_->copy_out(device_dst, 0, bytes_)); }

#else

}  // namespace ferry::capi
namespace ferry::device {
class DeviceStage {};  // never made without CUDA
}  // namespace ferry::device
namespace ferry::capi {

StagedBuffer::StagedBuffer(int, void*, const void*, size_t, bool) { built_without_cuda("a device buffer"); }
StagedBuffer::~StagedBuffer() = default;
uint8_t* StagedBuffer::host() const { return nullptr; }
void StagedBuffer::deliver(void*) {}

#endif

}  // namespace ferry::capi
