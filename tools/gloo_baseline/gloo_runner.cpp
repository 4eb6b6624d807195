#include "gloo_runner.h"

#include <xxhash.h>

#include "input_pattern.h"
#include "process_cpu.h"

#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>

#include <netdb.h>
#include <sys/socket.h>

namespace ferry::gloo_baseline {

namespace {

// Tags of the new-style collectives; only one runs at a time, any distinct pair works.
constexpr std::uint32_t kAllreduceTag = 1;
constexpr std::uint32_t kBarrierTag = 2;

// Builds the chosen Gloo all-reduce over data[0..count), in place, sum. All
// set-up (buffer registration, the classic algorithms' scratch inboxes) happens
// here, outside the timed region; the returned call runs one all-reduce.
template <typename T>
std::function<void()> make_allreduce(Algorithm algorithm, const std::shared_ptr<gloo::Context>& context, T* data,
                                     std::size_t count, std::chrono::milliseconds timeout) {
  switch (algorithm) {
    case Algorithm::allreduce: {
      auto options = std::make_shared<gloo::AllreduceOptions>(context);
      options->setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      options->setOutput(data, count);  // no input: the output is reduced in place
      using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);
      options->setReduceFunction(static_cast<ReduceFn>(&gloo::sum<T>));
      options->setTag(kAllreduceTag);
      options->setTimeout(timeout);
      return [options] { gloo::allreduce(*options); };
    }
    case Algorithm::ring: {
      // bench_args rejects counts above INT_MAX for the classic algorithms.
      auto ring = std::make_shared<gloo::AllreduceRing<T>>(context, std::vector<T*>{data}, static_cast<int>(count));
      return [ring] { ring->run(); };
    }
    case Algorithm::allgather: break;  // not an all-reduce: run_allgather
    case Algorithm::ring_chunked: {
      auto ring =
          std::make_shared<gloo::AllreduceRingChunked<T>>(context, std::vector<T*>{data}, static_cast<int>(count));
      return [ring] { ring->run(); };
    }
  }
  throw std::logic_error("unknown algorithm");
}

// Debian's Gloo (git 2022-05) checks getaddrinfo's result against -1 only, so
// a host name that does not resolve (EAI_NONAME) makes CreateDevice read an
// uninitialised list and crash. Resolve it once here, the way Gloo will.
void check_host_resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rv = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rv != 0) {
    throw std::runtime_error("cannot resolve --host '" + host + "': " + ::gai_strerror(rv));
  }
  ::freeaddrinfo(found);
}

std::shared_ptr<gloo::Context> rendezvous(const BenchArgs& args) {
  check_host_resolves(args.host);
  // Every rank may create it; create_directories tolerates the race.
  std::filesystem::create_directories(args.store_dir);
  gloo::rendezvous::FileStore file_store(args.store_dir.string());
  gloo::rendezvous::PrefixStore store(args.run_id, file_store);

  gloo::transport::tcp::attr attr;
  attr.hostname = args.host;
  auto device = gloo::transport::tcp::CreateDevice(attr);

  auto context = std::make_shared<gloo::rendezvous::Context>(args.rank, args.world);
  // connectFullMesh hands this timeout to the store wait and to every pair.
  context->setTimeout(args.timeout);
  context->connectFullMesh(store, device);
  return context;
}

}  // namespace

GlooBench::GlooBench(const BenchArgs& args) : args_(args), context_(rendezvous(args)) {}

GlooBench::~GlooBench() = default;

void GlooBench::barrier() {
  gloo::BarrierOptions options(context_);
  options.setTag(kBarrierTag);
  options.setTimeout(args_.timeout);
  gloo::barrier(options);
}

SizeResult GlooBench::run_size(std::size_t bytes) {
  if (args_.algorithm == Algorithm::allgather) return run_allgather(bytes);
  switch (args_.dtype) {
    case Dtype::f32: return run_typed<float>(bytes);
    case Dtype::f64: return run_typed<double>(bytes);
    case Dtype::i32: return run_typed<std::int32_t>(bytes);
  }
  throw std::logic_error("unknown dtype");
}

template <typename T>
SizeResult GlooBench::run_typed(std::size_t bytes) {
  const std::size_t count = bytes / sizeof(T);
  // The pristine input is generated once; each iteration starts from a copy,
  // because the all-reduce overwrites its buffer.
  std::vector<T> input(count);
  tooling::fill_input(args_.dtype, input.data(), count, args_.seed, args_.rank);
  std::vector<T> work(count);
  const auto run_once = make_allreduce<T>(args_.algorithm, context_, work.data(), count, args_.timeout);

  SizeResult result;
  result.bytes = bytes;
  result.times_s.reserve(static_cast<std::size_t>(args_.iters));
  for (int iteration = 0; iteration < args_.warmup + args_.iters; ++iteration) {
    std::memcpy(work.data(), input.data(), bytes);
    barrier();
    const double cpu_before = tooling::process_cpu_s();
    const auto start = std::chrono::steady_clock::now();
    run_once();
    const auto stop = std::chrono::steady_clock::now();
    const double cpu_after = tooling::process_cpu_s();
    if (iteration >= args_.warmup) {
      result.times_s.push_back(std::chrono::duration<double>(stop - start).count());
      result.cpu_s += cpu_after - cpu_before;
    }
  }

  result.result_hash = XXH3_64bits(work.data(), bytes);
  std::size_t first_bad = 0;
  result.correct = tooling::matches_expected(args_.dtype, tooling::ReduceKind::sum, work.data(), count, args_.seed,
                                             args_.world, &first_bad);
  if (!result.correct) {
    std::fprintf(stderr, "ferry-gloo-bench[rank %d]: %zu bytes: element %zu differs from the expected sum\n",
                 args_.rank, bytes, first_bad);
  }
  return result;
}

std::string to_json_line(const BenchArgs& args, const SizeResult& result) {
  std::string line = "{\"rank\":" + std::to_string(args.rank) + ",\"world\":" + std::to_string(args.world) +
                     ",\"bytes\":" + std::to_string(result.bytes) + ",\"dtype\":\"" +
                     std::string(dtype_name(args.dtype)) + "\",\"algorithm\":\"" +
                     std::string(algorithm_name(args.algorithm)) + "\",\"times_s\":[";
  char number[32];
  for (std::size_t i = 0; i < result.times_s.size(); ++i) {
    std::snprintf(number, sizeof number, "%s%.9g", i == 0 ? "" : ",", result.times_s[i]);
    line += number;
  }
  std::snprintf(number, sizeof number, "%016" PRIx64, result.result_hash);
  line += "],\"result_hash\":\"";
  line += number;
  line += "\",\"correct\":";
  line += result.correct ? "true" : "false";
  std::snprintf(number, sizeof number, ",\"cpu_s\":%.9g}", result.cpu_s);
  line += number;
  return line;
}

}  // namespace ferry::gloo_baseline
