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

#include "gather_bench.h"
#include "sparse_step_bench.h"
#include "input_pattern.h"
#include "link_matrix.h"
#include "peer_session.h"
#include "process_cpu.h"
#include "quant_names.h"  // tools/common
#include "rank_report.h"

namespace ferry::bench {

using tooling::fill_input;
using tooling::matches_expected;
using tooling::hash_hex;
using tooling::op_seed;

namespace {

constexpr int kExitFailed = 1;

ferry_reduce_op to_ferry(ReduceKind op) {
  switch (op) {
    case ReduceKind::sum: return FERRY_OP_SUM;
    case ReduceKind::avg: return FERRY_OP_AVG;
    case ReduceKind::prod: return FERRY_OP_PROD;
    case ReduceKind::min: return FERRY_OP_MIN;
    case ReduceKind::max: return FERRY_OP_MAX;
  }
  return FERRY_OP_SUM;
}

class PeerBench {
 public:
  PeerBench(const BenchArgs& args, PeerSession& session, std::FILE* reports)
      : args_(args), session_(session), reports_(reports) {}

  // Returns false when some result was wrong (the report says which size).
  bool run_all_sizes() {
    bool all_correct = true;
    for (std::size_t i = 0; i < args_.sizes.size(); ++i) {
      const RankReport report = run_size(args_.sizes[i], i == 0);
      all_correct = all_correct && report.correct;
      std::fprintf(reports_, "%s\n", ferry_report_line(args_, report).c_str());
      std::fflush(reports_);
    }
    report_link_matrix();
    return all_correct;
  }

 private:
  struct Iteration {
    std::uint64_t bytes_sent = 0;  // summed over the ops
    double agreement_s = 0;        // the longest op's quant_agreement_s
  };
  // Issues every op, then waits every op that was issued (each must be waited
  // exactly once, failed or not).
  Iteration run_iteration(const std::vector<Buffer>& send, std::vector<Buffer>& recv, std::size_t count) {
    std::vector<ferry_op*> ops(send.size(), nullptr);
    std::string failure;
    for (std::size_t k = 0; k < send.size(); ++k) {
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      desc.dtype = ferry_dtype_of(args_.dtype);
      desc.op = to_ferry(args_.op);
      desc.tag = k;
      desc.quant = quant_;
      const ferry_result issued = ferry_allreduce_async(session_.comm(), send[k].get(), recv[k].get(), count, &desc, &ops[k]);
      if (issued != FERRY_OK) {
        failure = "ferry_allreduce_async (tag " + std::to_string(k) + "): " + ferry_strerror(issued) + ": " +
                  ferry_last_error();
        ops[k] = nullptr;
        break;
      }
    }
    Iteration done;
    for (std::size_t k = 0; k < ops.size() && ops[k] != nullptr; ++k) {
      ferry_op_info info;
      std::memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      const ferry_result waited = ferry_op_wait(ops[k], &info);
      if (waited != FERRY_OK && failure.empty()) {
        failure = "all-reduce (tag " + std::to_string(k) + "): " + ferry_strerror(waited) + ": " + ferry_last_error();
      }
      done.bytes_sent += info.bytes_sent;
      done.agreement_s = std::max(done.agreement_s, info.quant_agreement_s);
    }
    if (!failure.empty()) throw PeerFailure(failure);
    return done;
  }

  // link_matrix.h: every peer flushes its measurements to the master, then rank 0
  // reads the whole matrix while the others wait in the group.
  void report_link_matrix() {
    query_link_matrix(session_.comm());
    session_.barrier();
    if (session_.rank() == 0) {
      std::fprintf(reports_, "%s\n", link_matrix_line(query_link_matrix(session_.comm())).c_str());
      std::fflush(reports_);
    }
    session_.barrier();
  }

  RankReport run_size(std::size_t bytes, bool first_size) {
    const std::size_t count = bytes / elem_type_size(args_.dtype);
    std::vector<Buffer> send, recv;
    std::unique_ptr<GatherRounds> gathers;
    std::unique_ptr<SparseStepRounds> sparse;
    if (is_all_gather(args_)) gathers = std::make_unique<GatherRounds>(args_, session_, bytes);
    if (is_sparse_step(args_)) sparse = std::make_unique<SparseStepRounds>(args_, session_, bytes);
    for (std::uint32_t k = 0; k < args_.concurrent && !gathers && !sparse; ++k) {
      send.push_back(allocate(bytes));
      fill_input(args_.dtype, args_.op, send.back().get(), count, op_seed(k), session_.rank());
      recv.push_back(allocate(bytes));
      std::memset(recv.back().get(), 0, bytes);  // fault the pages in outside the timing
    }

    RankReport report;
    report.peer_index = args_.peer_index;
    report.rank = session_.rank();
    report.peer_id = session_.peer_id();
    report.world = session_.world();
    report.shared_memory_lanes = static_cast<int>(session_.shared_memory_lanes());
    report.bytes = bytes;
    double cpu_s = 0;
    for (int iteration = 0; iteration < args_.warmup + args_.iters; ++iteration) {
      const bool timed = iteration >= args_.warmup;
      if (first_size && iteration == args_.warmup && args_.fault_peer == args_.peer_index) {
        session_.log("--fault-peer: dying before the first timed iteration, as asked");
        std::fflush(stderr);
        std::_Exit(kExitFailed);
      }
      if (gathers) gathers->drop_results();
      session_.barrier();
      const double cpu_before = tooling::process_cpu_s();
      const auto start = std::chrono::steady_clock::now();
      const Iteration done = gathers  ? Iteration{gathers->run_iteration(), 0}
                             : sparse ? Iteration{sparse->run_iteration(), 0}
                                      : run_iteration(send, recv, count);
      const auto stop = std::chrono::steady_clock::now();
      const double cpu_after = tooling::process_cpu_s();
      if (timed) {
        report.times_s.push_back(std::chrono::duration<double>(stop - start).count());
        report.bytes_sent.push_back(done.bytes_sent);
        report.agreement_s.push_back(done.agreement_s);
        cpu_s += cpu_after - cpu_before;
      }
    }
    report.cpu_s = cpu_s;

    report.correct = true;
    for (std::uint32_t k = 0; k < args_.concurrent && gathers; ++k) {
      report.hashes.push_back(gathers->hash(k));
      report.correct = gathers->correct(k) && report.correct;
    }
    for (std::uint32_t k = 0; k < args_.concurrent && sparse; ++k) {
      report.hashes.push_back(sparse->hash(k));
      report.correct = sparse->correct(k) && report.correct;
    }
    for (std::uint32_t k = 0; k < args_.concurrent && !gathers && !sparse; ++k) {
      report.hashes.push_back(hash_hex(recv[k].get(), bytes));
      std::size_t first_bad = 0;
      // A lossy codec changes the values (by design): then only bit-identity across peers is checked.
      if (quant_ == FERRY_QUANT_NONE &&
          !matches_expected(args_.dtype, args_.op, recv[k].get(), count, op_seed(k), session_.world(), &first_bad)) {
        report.correct = false;
        session_.log("%zu bytes, tag %u: element %zu differs from the exact expected result", bytes, k, first_bad);
      }
    }
    session_.log("%s done (%d iterations)", format_byte_size(bytes).c_str(), args_.iters);
    report.next_link_relay = static_cast<std::uint64_t>(session_.next_link_relay());
    report.relayed_bytes = static_cast<std::uint64_t>(session_.relayed_bytes());
    return report;
  }

  const BenchArgs& args_;
  const ferry_quant quant_ = tooling::parse_quant(args_.quant).value();  // parse_bench_args checked the name
  PeerSession& session_;
  std::FILE* const reports_;
};

}  // namespace

int run_peer(const BenchArgs& args) {
  return run_peer_process(args, [&](PeerSession& session, std::FILE* reports) {
    return PeerBench(args, session, reports).run_all_sizes();
  });
}

}  // namespace ferry::bench
