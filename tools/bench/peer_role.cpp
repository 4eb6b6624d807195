#include "peer_role.h"

#include <ferry/ferry.h>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "input_pattern.h"
#include "rank_report.h"

namespace ferry::bench {

using tooling::fill_input;
using tooling::matches_expected;
using tooling::hash_hex;
using tooling::op_seed;

namespace {

ferry_quant quant_of(const std::string& name) {
  if (name == "u8") return FERRY_QUANT_U8;
  if (name == "i8") return FERRY_QUANT_I8;
  if (name == "u4") return FERRY_QUANT_U4;
  if (name == "f16") return FERRY_QUANT_F16;
  if (name == "bf16") return FERRY_QUANT_BF16;
  return FERRY_QUANT_NONE;
}

}  // namespace

namespace {

// Any tag outside 0..C-1 (the measured ops') names the barrier.
constexpr std::uint64_t kBarrierTag = 0xBA221E5000000000ULL;
constexpr int kExitFailed = 1;
constexpr int kExitWrongResult = 3;

class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void must(ferry_result result, const std::string& what) {
  if (result != FERRY_OK) {
    throw PeerFailure(what + ": " + ferry_strerror(result) + ": " + ferry_last_error());
  }
}

ferry_dtype to_ferry(ElemType type) {
  switch (type) {
    case ElemType::f32: return FERRY_F32;
    case ElemType::f64: return FERRY_F64;
    case ElemType::i32: return FERRY_I32;
  }
  return FERRY_F32;
}

ferry_reduce_op to_ferry(ReduceKind op) {
  switch (op) {
    case ReduceKind::sum: return FERRY_OP_SUM;
    case ReduceKind::min: return FERRY_OP_MIN;
    case ReduceKind::max: return FERRY_OP_MAX;
  }
  return FERRY_OP_SUM;
}

double process_cpu_s() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// Page-aligned, so every element type (and any vector width) is aligned.
struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte[], FreeDeleter>;

Buffer allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 4096;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign));
  if (p == nullptr) throw PeerFailure("out of memory allocating " + std::to_string(bytes) + " bytes");
  return Buffer(p);
}

// Keeps the real stdout for the JSON lines and points fd 1 at stderr, so that
// nothing else printed to stdout can corrupt the stream the orchestrator parses.
std::FILE* claim_stdout_for_reports() {
  std::fflush(stdout);
  const int fd = ::dup(STDOUT_FILENO);
  if (fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return nullptr;
  return ::fdopen(fd, "w");
}

class PeerBench {
 public:
  PeerBench(const BenchArgs& args, std::FILE* reports) : args_(args), reports_(reports) {}
  ~PeerBench() { ferry_comm_destroy(comm_); }
  PeerBench(const PeerBench&) = delete;
  PeerBench& operator=(const PeerBench&) = delete;

  void join() {
    ferry_comm_params params;
    ferry_comm_params_init(&params);
    params.master_address = args_.master.c_str();
    params.p2p_connections = args_.connections;
    params.p2p_listen_host = args_.bind_host.c_str();
    if (args_.io_threads != 0) params.io_threads = args_.io_threads;
    if (args_.chunk_bytes != 0) params.max_chunk_bytes = args_.chunk_bytes;
    if (!args_.congestion_control.empty()) params.congestion_control = args_.congestion_control.c_str();
    if (!args_.secret_file.empty()) params.secret_file = args_.secret_file.c_str();
    const std::string cert = args_.tls_dir + "/peer.pem", key = args_.tls_dir + "/peer.key",
                      ca = args_.tls_dir + "/ca.pem";
    if (!args_.tls_dir.empty()) {
      params.tls_cert_file = cert.c_str();
      params.tls_key_file = key.c_str();
      params.tls_ca_file = ca.c_str();
    }
    must(ferry_comm_create(&params, &comm_), "ferry_comm_create");
    must(ferry_connect(comm_), "ferry_connect to " + args_.master);
    // Accepted peers admit newcomers together, until the ring has everyone.
    while (attribute(FERRY_ATTR_GROUP_WORLD_SIZE) < args_.peers) {
      must(ferry_update_topology(comm_), "ferry_update_topology");
    }
    world_ = static_cast<int>(attribute(FERRY_ATTR_GROUP_WORLD_SIZE));
    rank_ = static_cast<int>(attribute(FERRY_ATTR_RANK));
    log("joined: rank %d of %d", rank_, world_);
  }

  // Returns false when some result was wrong (the report says which size).
  bool run_all_sizes() {
    bool all_correct = true;
    for (std::size_t i = 0; i < args_.sizes.size(); ++i) {
      const RankReport report = run_size(args_.sizes[i], i == 0);
      all_correct = all_correct && report.correct;
      std::fprintf(reports_, "%s\n", ferry_report_line(args_, report).c_str());
      std::fflush(reports_);
    }
    return all_correct;
  }

 private:
  int64_t attribute(ferry_attribute which) const {
    int64_t value = 0;
    must(ferry_comm_get_attribute(comm_, which, &value), "ferry_comm_get_attribute");
    return value;
  }

  // `this` is argument 1 for the format attribute.
  __attribute__((format(printf, 2, 3))) void log(const char* format, ...) const {
    std::va_list values;
    va_start(values, format);
    std::fprintf(stderr, "ferry-bench peer %d: ", args_.peer_index);
    std::vfprintf(stderr, format, values);
    std::fputc('\n', stderr);
    va_end(values);
  }

  void barrier() {
    std::int32_t token = 1;
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    desc.dtype = FERRY_I32;
    desc.tag = kBarrierTag;
    must(ferry_allreduce(comm_, &token, &token, 1, &desc, nullptr), "barrier all-reduce");
  }

  // Issues every op, then waits every op that was issued (each must be waited
  // exactly once, failed or not). Returns the bytes sent, summed over the ops.
  std::uint64_t run_iteration(const std::vector<Buffer>& send, std::vector<Buffer>& recv, std::size_t count) {
    std::vector<ferry_op*> ops(send.size(), nullptr);
    std::string failure;
    for (std::size_t k = 0; k < send.size(); ++k) {
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      desc.dtype = to_ferry(args_.dtype);
      desc.op = to_ferry(args_.op);
      desc.tag = k;
      desc.quant = quant_of(args_.quant);
      const ferry_result issued = ferry_allreduce_async(comm_, send[k].get(), recv[k].get(), count, &desc, &ops[k]);
      if (issued != FERRY_OK) {
        failure = "ferry_allreduce_async (tag " + std::to_string(k) + "): " + ferry_strerror(issued) + ": " +
                  ferry_last_error();
        ops[k] = nullptr;
        break;
      }
    }
    std::uint64_t sent = 0;
    for (std::size_t k = 0; k < ops.size() && ops[k] != nullptr; ++k) {
      ferry_op_info info;
      std::memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      const ferry_result waited = ferry_op_wait(ops[k], &info);
      if (waited != FERRY_OK && failure.empty()) {
        failure = "all-reduce (tag " + std::to_string(k) + "): " + ferry_strerror(waited) + ": " + ferry_last_error();
      }
      sent += info.bytes_sent;
    }
    if (!failure.empty()) throw PeerFailure(failure);
    return sent;
  }

  RankReport run_size(std::size_t bytes, bool first_size) {
    const std::size_t count = bytes / elem_type_size(args_.dtype);
    std::vector<Buffer> send, recv;
    for (std::uint32_t k = 0; k < args_.concurrent; ++k) {
      send.push_back(allocate(bytes));
      fill_input(args_.dtype, send.back().get(), count, op_seed(k), rank_);
      recv.push_back(allocate(bytes));
      std::memset(recv.back().get(), 0, bytes);  // fault the pages in outside the timing
    }

    RankReport report;
    report.peer_index = args_.peer_index;
    report.rank = rank_;
    report.world = world_;
    report.bytes = bytes;
    double cpu_s = 0;
    for (int iteration = 0; iteration < args_.warmup + args_.iters; ++iteration) {
      const bool timed = iteration >= args_.warmup;
      if (first_size && iteration == args_.warmup && args_.fault_peer == args_.peer_index) {
        log("--fault-peer: dying before the first timed iteration, as asked");
        std::fflush(stderr);
        std::_Exit(kExitFailed);
      }
      barrier();
      const double cpu_before = process_cpu_s();
      const auto start = std::chrono::steady_clock::now();
      const std::uint64_t sent = run_iteration(send, recv, count);
      const auto stop = std::chrono::steady_clock::now();
      const double cpu_after = process_cpu_s();
      if (timed) {
        report.times_s.push_back(std::chrono::duration<double>(stop - start).count());
        report.bytes_sent.push_back(sent);
        cpu_s += cpu_after - cpu_before;
      }
    }
    report.cpu_s = cpu_s;

    report.correct = true;
    for (std::uint32_t k = 0; k < args_.concurrent; ++k) {
      report.hashes.push_back(hash_hex(recv[k].get(), bytes));
      std::size_t first_bad = 0;
      // A lossy codec changes the values (by design): then only bit-identity across peers is checked.
      if (args_.quant == "none" &&
          !matches_expected(args_.dtype, args_.op, recv[k].get(), count, op_seed(k), world_, &first_bad)) {
        report.correct = false;
        log("%zu bytes, tag %u: element %zu differs from the exact expected result", bytes, k, first_bad);
      }
    }
    log("%s done (%d iterations)", format_byte_size(bytes).c_str(), args_.iters);
    return report;
  }

  const BenchArgs& args_;
  std::FILE* const reports_;
  ferry_comm* comm_ = nullptr;
  int world_ = 0;
  int rank_ = 0;
};

}  // namespace

int run_peer(const BenchArgs& args) {
  std::FILE* reports = claim_stdout_for_reports();
  if (reports == nullptr) {
    std::perror("ferry-bench peer: cannot set up stdout");
    return kExitFailed;
  }
  bool all_correct = false;
  try {
    PeerBench bench(args, reports);
    bench.join();
    all_correct = bench.run_all_sizes();
  } catch (const PeerFailure& e) {
    std::fprintf(stderr, "ferry-bench peer %d: %s\n", args.peer_index, e.what());
    std::fclose(reports);
    return kExitFailed;
  }
  std::fclose(reports);
  return all_correct ? 0 : kExitWrongResult;
}

}  // namespace ferry::bench
