// The device query and DeviceBuffer of device_codecs.h.
#include <string>

#include "cuda/cuda_status.h"
#include "cuda/device_codecs.h"

namespace ferry::device {
namespace {

void throw_if_failed(cudaError_t error, const char* what) {
  Status status = cuda_status(error, what);
  if (!status.ok()) throw Error(status.code, status.message);
}

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return count;
}

std::string device_summary() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return "no CUDA device: " + cuda_status(error, "cudaGetDeviceCount").message;
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0";
  cudaDeviceProp prop{};
  std::string text = std::to_string(count) + (count == 1 ? " device" : " devices");
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
    text += std::string(": ") + prop.name + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
            std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
  }
  return text;
}

Status synchronize() { return cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  throw_if_failed(cudaMalloc(&data_, bytes == 0 ? 1 : bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() { (void)cudaFree(data_); }

void DeviceBuffer::upload(const void* host, size_t bytes) {
  throw_if_failed(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  throw_if_failed(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy from the device");
}

std::vector<uint8_t> DeviceBuffer::download_bytes(size_t bytes) const {
  std::vector<uint8_t> out(bytes);
  download(out.data(), bytes);
  return out;
}

}  // namespace ferry::device
