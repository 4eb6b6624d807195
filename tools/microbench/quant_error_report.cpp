// The error of each quantization codec (core/quant.h) on normal(0, 1) data, per kind and
// block size: bytes per f32, the max and RMS error in units of the data's range, and the
// worst error over its bound (scale/2 of its block for the affine kinds; half an ulp for
// f16/bf16). Not a test: the figures behind kDefaultQuantBlock and docs/quantization.md's table.
//   usage: ferry_quant_report
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/quant.h"
#include "report_check.h"

using namespace ferry;

namespace {

using Bytes = std::vector<uint8_t>;

bool is_affine(Quant kind) { return kind == Quant::u8 || kind == Quant::i8 || kind == Quant::u4; }

// An affine block on the wire: min and scale (f32 here), then its codes (quant.h's layout).
float block_scale(QuantSpec spec, const Bytes& wire, size_t block_index) {
  const size_t codes = spec.kind == Quant::u4 ? (spec.block + 1) / 2 : spec.block;
  float scale = 0;
  std::memcpy(&scale, wire.data() + block_index * (2 * sizeof(float) + codes) + sizeof(float), sizeof scale);
  return scale;
}

void check(const Status& status) { report::check("ferry_quant_report", status); }

}  // namespace

int main() {
  std::mt19937_64 rng(1);
  std::normal_distribution<double> normal(0.0, 1.0);
  const size_t count = size_t{1} << 22;
  std::vector<float> x(count);
  for (float& v : x) v = static_cast<float>(normal(rng));
  float lo = x[0];
  float hi = x[0];
  for (float v : x) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  const double range = static_cast<double>(hi) - static_cast<double>(lo);
  std::printf("normal(0, 1), %zu floats, range %.3f; errors in units of that range,\n", count, range);
  std::printf("and the worst error over its bound (scale/2 of its block; half an ulp for f16/bf16)\n");
  std::printf("%-5s %6s %9s %12s %12s %12s\n", "kind", "block", "bytes/f32", "max|err|", "rms err", "worst/bound");
  for (Quant kind : {Quant::u8, Quant::i8, Quant::u4, Quant::f16, Quant::bf16}) {
    for (uint32_t block : {32u, 64u, 128u, 256u, 512u, 1024u, 4096u}) {
      if (!is_affine(kind) && block != 256u) continue;
      const QuantSpec spec{kind, block};
      Bytes wire(quant_encoded_bytes<float>(spec, count));
      quant_encode(spec, x.data(), count, wire.data());
      std::vector<float> y(count);
      check(quant_decode(spec, wire.data(), wire.size(), count, y.data()));
      double max_error = 0;
      double sum_squares = 0;
      double worst = 0;
      for (size_t i = 0; i < count; ++i) {
        const double e = std::fabs(static_cast<double>(y[i]) - static_cast<double>(x[i]));
        max_error = std::max(max_error, e);
        sum_squares += e * e;
        double bound = 0;
        if (is_affine(kind)) {
          bound = static_cast<double>(block_scale(spec, wire, i / block)) / 2;
        } else {
          // Half an ulp: 2^(exponent - p), the exponent no lower than the format's least normal one.
          const int p = kind == Quant::f16 ? 11 : 8;
          const int least = kind == Quant::f16 ? -14 : -126;
          bound = std::ldexp(1.0, std::max(std::ilogb(y[i] == 0 ? x[i] : y[i]), least) - p);
        }
        worst = std::max(worst, e / bound);
      }
      std::printf("%-5s %6u %8.2f%% %12.3e %12.3e %12.4f\n", std::string(quant_name(kind)).c_str(),
                  is_affine(kind) ? block : 0u, 100.0 * static_cast<double>(wire.size()) / (4.0 * count),
                  max_error / range, std::sqrt(sum_squares / count) / range, worst);
    }
  }
  return 0;
}
