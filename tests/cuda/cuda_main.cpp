// ferry_cuda_tests' main: exits 77 (ctest's skip) with one line saying why
// when there is no CUDA device, so a machine without a GPU reports the suite
// as skipped, never as passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "cuda/device_codecs.h"

int main(int argc, char** argv) {
  if (ferry::device::device_count() == 0) {
    std::printf("ferry_cuda_tests: SKIPPED, %s\n", ferry::device::device_summary().c_str());
    return 77;
  }
  std::printf("ferry_cuda_tests: %s\n", ferry::device::device_summary().c_str());
  return Catch::Session().run(argc, argv);
}
