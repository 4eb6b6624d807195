#include "sync_content.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace ferry::bench {

namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

void fill_weights(void* out, std::size_t bytes, std::uint64_t seed) {
  constexpr float kSigma = 0.02f;
  // The sum of four uniforms on [0, 65536) has mean 131070 and variance 4 * 65536^2 / 12.
  const float scale = kSigma / (65536.0f * std::sqrt(4.0f / 12.0f));
  auto* bytes_out = static_cast<unsigned char*>(out);
  std::uint64_t state = seed * 0xD1B54A32D192ED03ULL;
  const std::size_t floats = bytes / sizeof(float);
  for (std::size_t i = 0; i < floats; ++i) {
    const std::uint64_t r = splitmix64(state);
    const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    const float value = (sum - 131070.0f) * scale;
    std::memcpy(bytes_out + i * sizeof(float), &value, sizeof value);
  }
  const std::uint64_t tail = splitmix64(state);
  std::memcpy(bytes_out + floats * sizeof(float), &tail, bytes % sizeof(float));
}

std::size_t state_file_bytes(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error("--state-file " + path + ": " + ec.message());
  return static_cast<std::size_t>(size);
}

void load_state_file(const std::string& path, void* out, std::size_t bytes) {
  const std::size_t have = state_file_bytes(path);
  if (have < bytes) {
    throw std::runtime_error("--state-file " + path + " holds " + std::to_string(have) + " bytes, fewer than the " +
                             std::to_string(bytes) + " asked for");
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) throw std::runtime_error("--state-file " + path + ": " + std::strerror(errno));
  const std::size_t got = std::fread(out, 1, bytes, file);
  std::fclose(file);
  if (got != bytes) throw std::runtime_error("--state-file " + path + ": short read");
}

void fill_holder_state(const std::string& state_file, void* out, std::size_t bytes) {
  if (state_file.empty()) {
    fill_weights(out, bytes, kHolderSeed);
  } else {
    load_state_file(state_file, out, bytes);
  }
}

}  // namespace ferry::bench
