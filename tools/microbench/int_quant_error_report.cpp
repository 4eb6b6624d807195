// The error table of integer-domain quantization (core/int_quant.h) against quant.h's
// per-hop codecs: the max and RMS error of the sum of N normal(0, 1) inputs, run as the
// ring runs each (for u8 and u4 each hop decode-add-encode, the owner encodes once more),
// and the wire bits an element. Not a test: the figures behind the design's choice.
//   usage: ferry_int_quant_report
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <vector>

#include "core/int_quant.h"
#include "core/quant.h"
#include "report_check.h"
#include "int_quant_ring.h"

using namespace ferry;
using namespace ferry::int_quant_ring;

namespace {

void check(const Status& status) { report::check("ferry_int_quant_report", status); }

}  // namespace

int main() {
  constexpr size_t kCount = size_t{1} << 18;
  std::printf("%-16s %4s %10s %10s %8s\n", "mode", "N", "max", "rms", "bits/el");
  for (uint32_t peers : {2u, 4u, 8u, 16u}) {
    std::vector<std::vector<float>> inputs;
    for (uint32_t p = 0; p < peers; ++p) inputs.push_back(normal_input<float>(kCount, 77 * peers + p));
    std::vector<double> exact(kCount, 0.0);
    for (const auto& x : inputs) {
      for (size_t i = 0; i < kCount; ++i) exact[i] += x[i];
    }
    const auto report = [&](const char* name, const std::vector<float>& y, double bits) {
      double max = 0, sq = 0;
      for (size_t i = 0; i < kCount; ++i) {
        const double e = std::fabs(double(y[i]) - exact[i]);
        max = std::max(max, e);
        sq += e * e;
      }
      std::printf("%-16s %4u %10.5f %10.5f %8.3f\n", name, peers, max, std::sqrt(sq / kCount), bits);
    };
    for (Quant kind : {Quant::u8, Quant::u4}) {
      const QuantSpec spec{kind};
      const size_t bytes = quant_encoded_bytes<float>(spec, kCount);
      Bytes wire(bytes);
      quant_encode(spec, inputs[0].data(), kCount, wire.data());
      for (uint32_t p = 1; p + 1 < peers; ++p) {
        check(quant_decode_add_encode(spec, wire.data(), bytes, inputs[p].data(), kCount, wire.data()));
      }
      std::vector<float> acc(kCount);
      check(quant_decode_add(spec, wire.data(), bytes, inputs[peers - 1].data(), kCount, acc.data()));
      quant_encode(spec, acc.data(), kCount, wire.data());
      check(quant_decode(spec, wire.data(), bytes, kCount, acc.data()));
      report(kind == Quant::u8 ? "u8 (per hop)" : "u4 (per hop)", acc, 8.0 * double(bytes) / kCount);
    }
    for (IntQuantKind kind : {IntQuantKind::i8h, IntQuantKind::i4h}) {
      for (IntRounding rounding : {IntRounding::nearest, IntRounding::stochastic}) {
        const IntQuantSpec spec{kind, 256, rounding, 1};
        const std::vector<float> absmax = agreed_absmax(spec, inputs);
        std::vector<size_t> order(peers);
        std::iota(order.begin(), order.end(), 0);
        const Bytes sum = ring_sum(spec, absmax, inputs, order, 0, kCount);
        // Wire bits an element, averaged over the ring's 2(N-1) steps: the
        // reduce-scatter's partials of 1..N-1 contributions, the all-gather's
        // exact sum, and the scale agreement (a ring max all-reduce of T).
        double bits = 0;
        for (uint32_t k = 1; k < peers; ++k) bits += int_quant_width(spec, k) + int_quant_width(spec, peers);
        bits = bits / (2.0 * (peers - 1)) + 32.0 / spec.block;
        char name[32];
        std::snprintf(name, sizeof name, "%s %s", kind == IntQuantKind::i8h ? "i8h" : "i4h",
                      rounding == IntRounding::nearest ? "rtn" : "sr");
        const std::vector<float> exact_sum = decode_sum(spec, absmax, sum, peers, ReduceOp::sum, 0, kCount);
        report(name, exact_sum, bits);
        if (kind == IntQuantKind::i8h && rounding == IntRounding::nearest) {
          // The alternative the design rejected: the owner re-encodes the sum
          // once (u8) for the all-gather: fewer bytes, a second error.
          const QuantSpec u8{Quant::u8};
          Bytes wire(quant_encoded_bytes<float>(u8, kCount));
          quant_encode(u8, exact_sum.data(), kCount, wire.data());
          std::vector<float> again(kCount);
          check(quant_decode(u8, wire.data(), wire.size(), kCount, again.data()));
          double rs_bits = 0;
          for (uint32_t k = 1; k < peers; ++k) rs_bits += int_quant_width(spec, k);
          const double ag_bits = 8.0 * double(wire.size()) / kCount;
          report("i8h+u8 regather", again, (rs_bits + (peers - 1) * ag_bits) / (2.0 * (peers - 1)) + 32.0 / spec.block);
        }
      }
    }
  }
  return 0;
}
