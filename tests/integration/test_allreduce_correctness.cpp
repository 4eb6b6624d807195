// Ring all-reduce correctness through the C API: every dtype x op, awkward
// counts, in place and not, 2..5 peers. Each peer checks its result against
// a reference computed here (integers exactly, floats within a stated bound
// of an f64 reference), and all peers must hold bit-identical bytes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>

#include "core/half.h"
#include "core/hash.h"
#include "harness.h"
#include "sanitized_build.h"

using namespace ferry::test;

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool is_float(ferry_dtype t) { return t == FERRY_F16 || t == FERRY_BF16 || t == FERRY_F32 || t == FERRY_F64; }

// Rounding unit of each float type: one rounding changes a value by at most this, relatively.
double unit_roundoff(ferry_dtype t) {
  switch (t) {
    case FERRY_F16: return std::ldexp(1.0, -11);
    case FERRY_BF16: return std::ldexp(1.0, -8);
    case FERRY_F32: return std::ldexp(1.0, -24);
    default: return std::ldexp(1.0, -53);
  }
}

double load_float(ferry_dtype t, const uint8_t* p) {
  uint16_t h;
  float f;
  double d;
  switch (t) {
    case FERRY_F16: std::memcpy(&h, p, 2); return ferry::f16_to_f32(h);
    case FERRY_BF16: std::memcpy(&h, p, 2); return ferry::bf16_to_f32(h);
    case FERRY_F32: std::memcpy(&f, p, 4); return f;
    default: std::memcpy(&d, p, 8); return d;
  }
}

void store_float(ferry_dtype t, uint8_t* p, double v) {
  uint16_t h;
  float f = static_cast<float>(v);
  switch (t) {
    case FERRY_F16: h = ferry::f32_to_f16(f); std::memcpy(p, &h, 2); return;
    case FERRY_BF16: h = ferry::f32_to_bf16(f); std::memcpy(p, &h, 2); return;
    case FERRY_F32: std::memcpy(p, &f, 4); return;
    default: std::memcpy(p, &v, 8); return;
  }
}

// Deterministic input of `rank` for one case.
std::vector<uint8_t> make_input(ferry_dtype t, ferry_reduce_op op, size_t count, size_t rank, uint64_t seed) {
  size_t esz = ferry_dtype_size(t);
  std::vector<uint8_t> out(count * esz);
  for (size_t i = 0; i < count; ++i) {
    uint64_t r = mix(seed * 1000003 + rank * 7919 + i);
    if (is_float(t)) {
      double unit = static_cast<double>(r >> 11) / 9007199254740992.0;  // [0, 1)
      double v = op == FERRY_OP_PROD ? 0.5 + unit : 4.0 * unit - 2.0;
      store_float(t, &out[i * esz], v);
    } else {
      std::memcpy(&out[i * esz], &r, esz);  // full range: wraparound is part of the contract
    }
  }
  return out;
}

template <class T>
T int_reference(ferry_reduce_op op, const std::vector<T>& xs) {
  using U = std::make_unsigned_t<T>;
  uint64_t mask = sizeof(T) == 8 ? ~0ULL : (1ULL << (8 * sizeof(T))) - 1;
  uint64_t acc = op == FERRY_OP_PROD ? 1 : 0;
  T lo = xs[0], hi = xs[0];
  for (T x : xs) {
    uint64_t u = static_cast<U>(x);
    acc = (op == FERRY_OP_PROD ? acc * u : acc + u) & mask;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  T wrapped = static_cast<T>(static_cast<U>(acc));
  switch (op) {
    case FERRY_OP_MIN: return lo;
    case FERRY_OP_MAX: return hi;
    case FERRY_OP_AVG: return static_cast<T>(wrapped / static_cast<T>(xs.size()));
    default: return wrapped;
  }
}

template <class T>
std::string check_ints(ferry_reduce_op op, const std::vector<std::vector<uint8_t>>& inputs, const uint8_t* result,
                       size_t count) {
  std::vector<T> xs(inputs.size());
  for (size_t i = 0; i < count; ++i) {
    for (size_t r = 0; r < inputs.size(); ++r) std::memcpy(&xs[r], &inputs[r][i * sizeof(T)], sizeof(T));
    T want = int_reference<T>(op, xs), got;
    std::memcpy(&got, result + i * sizeof(T), sizeof(T));
    if (got != want)
      return "element " + std::to_string(i) + ": got " + std::to_string(+got) + ", want " + std::to_string(+want);
  }
  return "";
}

// Each of the N-1 hops rounds once (f16/bf16 also round the final avg): the
// error is at most N * u * (sum of |x|) for sum/avg, N * u * |result| for prod,
// and zero for min/max, which never round.
std::string check_floats(ferry_dtype t, ferry_reduce_op op, const std::vector<std::vector<uint8_t>>& inputs,
                         const uint8_t* result, size_t count) {
  size_t esz = ferry_dtype_size(t);
  double n = static_cast<double>(inputs.size()), u = unit_roundoff(t);
  for (size_t i = 0; i < count; ++i) {
    double sum = 0, abs_sum = 0, prod = 1, lo = INFINITY, hi = -INFINITY;
    for (size_t r = 0; r < inputs.size(); ++r) {
      double x = load_float(t, &inputs[r][i * esz]);
      sum += x;
      abs_sum += std::fabs(x);
      prod *= x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    double got = load_float(t, result + i * esz), want = 0, bound = 0;
    switch (op) {
      case FERRY_OP_SUM: want = sum; bound = (n + 1) * u * abs_sum; break;
      case FERRY_OP_AVG: want = sum / n; bound = (n + 1) * u * abs_sum / n; break;
      case FERRY_OP_PROD: want = prod; bound = (n + 1) * u * std::fabs(prod); break;
      case FERRY_OP_MIN: want = lo; break;
      case FERRY_OP_MAX: want = hi; break;
    }
    if (!(std::fabs(got - want) <= bound))
      return "element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " + std::to_string(want) +
             " +- " + std::to_string(bound);
  }
  return "";
}

std::string check_result(ferry_dtype t, ferry_reduce_op op, const std::vector<std::vector<uint8_t>>& inputs,
                         const uint8_t* result, size_t count) {
  switch (t) {
    case FERRY_U8: return check_ints<uint8_t>(op, inputs, result, count);
    case FERRY_I8: return check_ints<int8_t>(op, inputs, result, count);
    case FERRY_U16: return check_ints<uint16_t>(op, inputs, result, count);
    case FERRY_I16: return check_ints<int16_t>(op, inputs, result, count);
    case FERRY_U32: return check_ints<uint32_t>(op, inputs, result, count);
    case FERRY_I32: return check_ints<int32_t>(op, inputs, result, count);
    case FERRY_U64: return check_ints<uint64_t>(op, inputs, result, count);
    case FERRY_I64: return check_ints<int64_t>(op, inputs, result, count);
    default: return check_floats(t, op, inputs, result, count);
  }
}

struct Case {
  ferry_dtype dtype;
  ferry_reduce_op op;
  size_t count;
  bool in_place;
};

std::vector<Case> all_cases() {
  // 0 (no-op), 1, fewer elements than peers, primes, and sizes that span many chunks.
  const std::vector<size_t> counts = ferry::test::kSanitized ? std::vector<size_t>{0, 1, 7, 65537}
                                                              : std::vector<size_t>{0, 1, 3, 7, 1009, 65537};
  std::vector<Case> cases;
  bool in_place = false;
  for (int t = FERRY_U8; t <= FERRY_F64; ++t)
    for (int op = FERRY_OP_SUM; op <= FERRY_OP_MAX; ++op)
      for (size_t count : counts) {
        cases.push_back({static_cast<ferry_dtype>(t), static_cast<ferry_reduce_op>(op), count, in_place});
        in_place = !in_place;
      }
  return cases;
}

// Every wire x world size x connection count, but TLS and shared memory run
// the odd world sizes only: those are enough.
std::vector<WireRun> wire_runs() {
  std::vector<WireRun> runs;
  for (Wire wire : {Wire::plain, Wire::tls, Wire::shm})
    for (size_t peers : ferry::test::swept_world_sizes({2, 3, 4, 5}))
      for (uint32_t connections : {1u, 3u})
        if (wire == Wire::plain || peers % 2 == 1) runs.push_back({wire, peers, connections});
  return runs;
}

}  // namespace

TEST_CASE("allreduce: every dtype x op x awkward count is correct and bit-identical on 2..5 peers",
          "[allreduce][correctness][tls]") {
  const WireRun run = GENERATE(from_range(wire_runs()));
  const Wire wire = run.wire;
  const size_t peers = run.peers;
  const uint32_t connections = run.connections;
  CAPTURE(wire_name(wire), peers, connections);
  WireScope scope(wire);
  EmbeddedMaster master;
  const auto cases = all_cases();
  // hashes[case][rank], problems[rank]
  std::vector<std::vector<uint64_t>> hashes(cases.size(), std::vector<uint64_t>(peers));
  std::vector<std::string> problems(peers);

  PeerSettings settings;
  settings.connections = connections;
  settings.max_chunk_bytes = 4096;  // many chunks per segment: exercises the pipeline
  auto results = run_peers(peers, [&](size_t) {
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    // Peers on one host share memory exactly when asked to: every lane, in and out, or none.
    int64_t shm_lanes = attribute(comm, FERRY_ATTR_SHARED_MEMORY_LANES);
    if (shm_lanes != (wire == Wire::shm ? 2 * static_cast<int64_t>(connections) : 0))
      problems[rank] += std::to_string(shm_lanes) + " lanes in shared memory\n";
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case& k = cases[c];
      std::vector<std::vector<uint8_t>> inputs;
      for (size_t r = 0; r < peers; ++r) inputs.push_back(make_input(k.dtype, k.op, k.count, r, c));
      std::vector<uint8_t> send = inputs[rank], recv(send.size(), 0xCD);
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      desc.dtype = k.dtype;
      desc.op = k.op;
      desc.tag = c;
      ferry_op_info info{};
      info.struct_size = sizeof info;
      uint8_t* out = k.in_place ? send.data() : recv.data();
      must(ferry_allreduce(comm, send.data(), out, k.count, &desc, &info), "ferry_allreduce");
      if (!k.in_place && send != inputs[rank]) problems[rank] += "case " + std::to_string(c) + ": send was modified\n";
      if (info.world_size != peers) problems[rank] += "case " + std::to_string(c) + ": wrong world size\n";
      std::string bad = check_result(k.dtype, k.op, inputs, out, k.count);
      if (!bad.empty())
        problems[rank] += "case " + std::to_string(c) + " (dtype " + std::to_string(k.dtype) + ", op " +
                          std::to_string(k.op) + ", count " + std::to_string(k.count) + "): " + bad + "\n";
      hashes[c][rank] = ferry::hash_bytes(out, k.count * ferry_dtype_size(k.dtype));
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t r = 0; r < peers; ++r) CHECK(problems[r] == "");
  for (size_t c = 0; c < cases.size(); ++c) {
    INFO("case " << c);
    for (size_t r = 1; r < peers; ++r) CHECK(hashes[c][r] == hashes[c][0]);
  }
}

TEST_CASE("allreduce: NaN propagates through min, max and sum on every peer", "[allreduce][correctness]") {
  const size_t peers = 3;
  EmbeddedMaster master;
  std::vector<std::string> problems(peers);
  auto results = run_peers(peers, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, peers);
    int64_t rank = attribute(comm, FERRY_ATTR_RANK);
    for (ferry_reduce_op op : {FERRY_OP_MIN, FERRY_OP_MAX, FERRY_OP_SUM}) {
      std::vector<float> data(100, static_cast<float>(rank + 1));
      data[static_cast<size_t>(10 * rank)] = std::numeric_limits<float>::quiet_NaN();  // a NaN on each peer, at its own index
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      desc.op = op;
      must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
      for (size_t i = 0; i < data.size(); ++i) {
        bool want_nan = i % 10 == 0 && i / 10 < peers;
        if (std::isnan(data[i]) != want_nan) problems[static_cast<size_t>(rank)] += "element " + std::to_string(i) + "\n";
      }
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (auto& p : problems) CHECK(p == "");
}
