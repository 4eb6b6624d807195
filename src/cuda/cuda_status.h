// CUDA runtime errors as ferry Statuses (Errc::system). Internal to src/cuda/.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/error.h"

namespace ferry::device {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::success();
  return Status::failure(Errc::system, std::string(what) + ": " + cudaGetErrorName(error) + " (" +
                                           cudaGetErrorString(error) + ")");
}

// The launch's own error (bad configuration), without waiting for the kernel.
inline Status launch_status(const char* kernel) { return cuda_status(cudaGetLastError(), kernel); }

// Grid size for a grid-stride kernel with `items` warps' worth of work:
// enough CTAs to fill the device several times over, never more than needed.
inline unsigned grid_for(size_t items_per_cta, size_t items) {
  constexpr size_t kMaxCtas = 132 * 32;  // H200: 132 SMs; grid-stride loops cover the rest
  const size_t ctas = (items + items_per_cta - 1) / items_per_cta;
  return static_cast<unsigned>(ctas < 1 ? 1 : (ctas > kMaxCtas ? kMaxCtas : ctas));
}

}  // namespace ferry::device
