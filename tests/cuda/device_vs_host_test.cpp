// The device codecs and content hash against the CPU's, byte for byte: every
// quant mode (u8, i8, u4, i8h, i4h, i8h-sr, i4h-sr) on random and edge-case
// data (NaN, inf, -0, subnormals, odd counts, partial last blocks), and the
// content hash of sizes around and across its 4 MiB blocks, aligned or not;
// and on a stream of the caller's.
#include <cuda_runtime.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "codec_inputs.h"
#include "core/content_hash.h"
#include "core/int_quant.h"
#include "core/quant.h"
#include "cuda/device_codecs.h"

using namespace ferry;
using ferry::codec_inputs::float_cases;
using ferry::codec_inputs::random_bytes;
using ferry::device::DeviceBuffer;

namespace {

void require_ok(const Status& status) {
  INFO(status.message);
  REQUIRE(status.ok());
}

// "" when equal, else where and how much they differ (never a dump of
// megabytes, as printing the vectors would be).
std::string difference(const std::vector<uint8_t>& device_bytes, const std::vector<uint8_t>& cpu_bytes) {
  if (device_bytes.size() != cpu_bytes.size()) {
    return "sizes " + std::to_string(device_bytes.size()) + " (device) and " + std::to_string(cpu_bytes.size());
  }
  size_t first = device_bytes.size(), differing = 0;
  for (size_t i = 0; i < device_bytes.size(); ++i) {
    if (device_bytes[i] == cpu_bytes[i]) continue;
    first = std::min(first, i);
    ++differing;
  }
  if (differing == 0) return "";
  return std::to_string(differing) + " of " + std::to_string(cpu_bytes.size()) + " bytes differ, the first at " +
         std::to_string(first) + ": device " + std::to_string(device_bytes[first]) + ", cpu " +
         std::to_string(cpu_bytes[first]);
}

template <class T>
DeviceBuffer upload(const std::vector<T>& values) {
  DeviceBuffer buffer(values.size() * sizeof(T));
  buffer.upload(values.data(), values.size() * sizeof(T));
  return buffer;
}

}  // namespace

TEMPLATE_TEST_CASE("device u8, i8 and u4 encodings are quant_encode's bytes", "[cuda]", float, double) {
  for (Quant kind : {Quant::u8, Quant::i8, Quant::u4}) {
    for (uint32_t block : {1u, 7u, 256u, 1000u, 65536u}) {
      for (size_t count : {size_t{1}, size_t{255}, size_t{4099}, size_t{300001}}) {
        for (const auto& input : float_cases<TestType>(count, count * 31 + block)) {
          const QuantSpec spec{kind, block};
          const size_t bytes = quant_encoded_bytes<TestType>(spec, count);
          std::vector<uint8_t> cpu(bytes);
          quant_encode<TestType>(spec, input.values.data(), count, cpu.data());
          const DeviceBuffer src = upload(input.values);
          DeviceBuffer dst(bytes);
          require_ok(device::quant_encode<TestType>(spec, src.as<TestType>(), count, dst.as<uint8_t>(), nullptr));
          require_ok(device::synchronize());
          INFO(quant_name(kind) << " block " << block << " count " << count << ": " << input.name);
          REQUIRE(difference(dst.download_bytes(bytes), cpu) == "");
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("device i8h, i4h, i8h-sr and i4h-sr maxima and encodings are int_quant's bytes", "[cuda]", float,
                   double) {
  for (Quant mode : {Quant::i8h, Quant::i4h, Quant::i8h_sr, Quant::i4h_sr}) {
    for (uint32_t block : {1u, 256u, 333u}) {
      for (size_t first_index : {size_t{0}, size_t{100}}) {
        for (size_t count : {size_t{1}, size_t{4099}, size_t{300001}}) {
          for (const auto& input : float_cases<TestType>(count, block + first_index + count)) {
            const IntQuantSpec spec = int_quant_spec({mode, block}, 0x5eed + count);
            const size_t blocks = int_quant_block_count(spec, first_index + count);
            std::vector<TestType> cpu_max(blocks, TestType(0));
            cpu_max[first_index / block] = TestType(0.5);  // an earlier chunk's maximum, merged into
            const DeviceBuffer max_device = upload(cpu_max);
            int_quant_absmax(spec, input.values.data(), count, first_index, cpu_max.data());
            const DeviceBuffer x = upload(input.values);
            require_ok(device::int_quant_absmax(spec, x.as<TestType>(), count, first_index, max_device.as<TestType>(),
                                                nullptr));
            const size_t bytes = int_quant_packed_bytes(spec, count, 1);
            std::vector<uint8_t> cpu(bytes);
            int_quant_encode(spec, 3, cpu_max.data(), first_index, input.values.data(), count, cpu.data());
            DeviceBuffer out(bytes);
            require_ok(device::int_quant_encode(spec, 3, max_device.as<TestType>(), first_index, x.as<TestType>(),
                                                count, out.as<uint8_t>(), nullptr));
            require_ok(device::synchronize());
            INFO(quant_name(mode) << " block " << block << " first " << first_index << " count " << count << ": "
                                  << input.name);
            std::vector<TestType> device_max(blocks);
            max_device.download(device_max.data(), blocks * sizeof(TestType));
            REQUIRE(std::memcmp(device_max.data(), cpu_max.data(), blocks * sizeof(TestType)) == 0);
            REQUIRE(difference(out.download_bytes(bytes), cpu) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("device modes the device does not encode are refused as invalid arguments", "[cuda]") {
  DeviceBuffer buffer(64);
  const Status status = device::quant_encode<float>({Quant::f16, 256}, buffer.as<float>(), 4, buffer.as<uint8_t>(),
                                                    nullptr);
  REQUIRE(status.code == Errc::invalid_argument);
}

TEST_CASE("device content hash is content_hash's, for every size class and alignment", "[cuda]") {
  const size_t kBlock = kContentHashBlock;
  for (size_t size : {size_t{0}, size_t{1}, size_t{16}, size_t{17}, size_t{240}, size_t{241}, size_t{1024},
                      size_t{1025}, size_t{65537}, kBlock - 1, kBlock, kBlock + 1, kBlock + 240, kBlock + 241,
                      3 * kBlock + 12345, 9 * kBlock}) {
    for (size_t offset : {size_t{0}, size_t{3}}) {
      const std::vector<uint8_t> data = random_bytes(size + offset, size);
      DeviceBuffer buffer(size + offset);
      buffer.upload(data.data(), size + offset);
      const auto* device_data = buffer.as<uint8_t>() + offset;
      uint64_t hash = 0;
      require_ok(device::content_hash(device_data, size, nullptr, &hash));
      INFO("size " << size << " offset " << offset);
      REQUIRE(hash == content_hash(data.data() + offset, size));
      // The block hashes, as content_hash_many gives them.
      std::vector<std::vector<uint64_t>> cpu_blocks;
      std::pair<const void*, size_t> one{data.data() + offset, size};
      uint64_t unused = 0;
      content_hash_many({&one, 1}, {&unused, 1}, 1, &cpu_blocks);
      DeviceBuffer blocks(cpu_blocks[0].size() * 8);
      require_ok(device::content_block_hashes(device_data, size, blocks.as<uint64_t>(), nullptr));
      require_ok(device::synchronize());
      std::vector<uint64_t> device_blocks(cpu_blocks[0].size());
      blocks.download(device_blocks.data(), device_blocks.size() * 8);
      REQUIRE(device_blocks == cpu_blocks[0]);
    }
  }
}

TEST_CASE("device content hash of float data with NaN, inf and subnormals is content_hash's", "[cuda]") {
  for (const auto& input : float_cases<float>(3 * (kContentHashBlock / 4) + 1001, 7)) {
    const size_t size = input.values.size() * sizeof(float);
    DeviceBuffer buffer(size);
    buffer.upload(input.values.data(), size);
    uint64_t hash = 0;
    require_ok(device::content_hash(buffer.data(), size, nullptr, &hash));
    INFO(input.name);
    REQUIRE(hash == content_hash(input.values.data(), size));
  }
}

TEST_CASE("device codecs run on the caller's stream", "[cuda]") {
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const std::vector<float> values = float_cases<float>(100003, 5)[0].values;
  const size_t size = values.size() * sizeof(float);
  const DeviceBuffer x = upload(values);
  const QuantSpec spec{Quant::u8, kDefaultQuantBlock};
  const size_t bytes = quant_encoded_bytes<float>(spec, values.size());
  std::vector<uint8_t> cpu(bytes);
  quant_encode<float>(spec, values.data(), values.size(), cpu.data());
  DeviceBuffer out(bytes);
  require_ok(device::quant_encode<float>(spec, x.as<float>(), values.size(), out.as<uint8_t>(), stream));
  std::vector<uint8_t> device_bytes(bytes);
  REQUIRE(cudaMemcpyAsync(device_bytes.data(), out.data(), bytes, cudaMemcpyDeviceToHost, stream) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
  REQUIRE(difference(device_bytes, cpu) == "");
  uint64_t hash = 0;
  require_ok(device::content_hash(x.data(), size, stream, &hash));  // synchronizes the stream itself
  REQUIRE(hash == content_hash(values.data(), size));
  REQUIRE(cudaStreamDestroy(stream) == cudaSuccess);
}
