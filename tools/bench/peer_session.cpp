#include "peer_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdlib>
#include <functional>

namespace ferry::bench {

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitWrongResult = 3;
// Any tag outside the measured ops' (0..C-1) names the barrier.
constexpr std::uint64_t kBarrierTag = 0xBA221E5000000000ULL;

std::FILE* claim_stdout_for_reports() {
  std::fflush(stdout);
  const int fd = ::dup(STDOUT_FILENO);
  if (fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return nullptr;
  return ::fdopen(fd, "w");
}

}  // namespace

void must(ferry_result result, const std::string& what) {
  if (result != FERRY_OK) {
    throw PeerFailure(what + ": " + ferry_strerror(result) + ": " + ferry_last_error());
  }
}

ferry_dtype ferry_dtype_of(ElemType type) {
  switch (type) {
    case ElemType::f32: return FERRY_F32;
    case ElemType::f64: return FERRY_F64;
    case ElemType::i32: return FERRY_I32;
  }
  return FERRY_F32;
}

Buffer allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 4096;
  auto* p = static_cast<std::byte*>(std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign));
  if (p == nullptr) throw PeerFailure("out of memory allocating " + std::to_string(bytes) + " bytes");
  return Buffer(p);
}

void PeerSession::join() {
  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = args_.master.c_str();
  params.p2p_connections = args_.connections;
  params.p2p_listen_host = args_.bind_host.c_str();
  if (args_.io_threads != 0) params.io_threads = args_.io_threads;
  if (args_.chunk_bytes != 0) params.max_chunk_bytes = args_.chunk_bytes;
  if (!args_.congestion_control.empty()) params.congestion_control = args_.congestion_control.c_str();
  if (args_.peer_timeout_ms != 0) params.timeout_ms = args_.peer_timeout_ms;
  params.shared_memory = args_.shared_memory ? 1 : 0;
  params.dial_out_only = std::count(args_.dial_out_only.begin(), args_.dial_out_only.end(), args_.peer_index) ? 1 : 0;
  if (!args_.secret_file.empty()) params.secret_file = args_.secret_file.c_str();
  const std::string cert = args_.tls_dir + "/peer.pem", key = args_.tls_dir + "/peer.key",
                    ca = args_.tls_dir + "/ca.pem";
  if (!args_.tls_dir.empty()) {
    params.tls_cert_file = cert.c_str();
    params.tls_key_file = key.c_str();
    params.tls_ca_file = ca.c_str();
  }
  must(ferry_comm_create(&params, &comm_), "ferry_comm_create");
  // A short --peer-timeout-ms can end a wait the run still affords: the peer stays
  // pending and asks again, as ferry.h says (the orchestrator's deadline bounds it).
  auto patient = [&](const std::function<ferry_result()>& call, const std::string& what) {
    ferry_result rc = call();
    while (args_.peer_timeout_ms != 0 && rc == FERRY_ERR_TIMEOUT) rc = call();
    must(rc, what);
  };
  patient([&] { return ferry_connect(comm_); }, "ferry_connect to " + args_.master);
  while (attribute(FERRY_ATTR_GROUP_WORLD_SIZE) < args_.peers) {
    patient([&] { return ferry_update_topology(comm_); }, "ferry_update_topology");
  }
  world_ = static_cast<int>(attribute(FERRY_ATTR_GROUP_WORLD_SIZE));
  rank_ = static_cast<int>(attribute(FERRY_ATTR_RANK));
  log("joined: rank %d of %d", rank_, world_);
}

void PeerSession::barrier() {
  std::int32_t token = 1;
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  desc.dtype = FERRY_I32;
  desc.tag = kBarrierTag;
  must(ferry_allreduce(comm_, &token, &token, 1, &desc, nullptr), "barrier all-reduce");
}

std::int64_t PeerSession::attribute(ferry_attribute which) const {
  std::int64_t value = 0;
  must(ferry_comm_get_attribute(comm_, which, &value), "ferry_comm_get_attribute");
  return value;
}

void PeerSession::log(const char* format, ...) const {
  std::va_list values;
  va_start(values, format);
  std::fprintf(stderr, "ferry-bench peer %d: ", args_.peer_index);
  std::vfprintf(stderr, format, values);
  std::fputc('\n', stderr);
  va_end(values);
}

int run_peer_process(const BenchArgs& args, const std::function<bool(PeerSession& session, std::FILE* reports)>& body) {
  std::FILE* reports = claim_stdout_for_reports();
  if (reports == nullptr) {
    std::perror("ferry-bench peer: cannot set up stdout");
    return kExitFailed;
  }
  bool all_correct = false;
  try {
    PeerSession session(args);
    session.join();
    all_correct = body(session, reports);
  } catch (const PeerFailure& e) {
    std::fprintf(stderr, "ferry-bench peer %d: %s\n", args.peer_index, e.what());
    std::fclose(reports);
    return kExitFailed;
  }
  std::fclose(reports);
  return all_correct ? 0 : kExitWrongResult;
}

}  // namespace ferry::bench
