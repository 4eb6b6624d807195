// ferry_comm_* and ferry_allreduce: argument checks and translation only;
// peer/ does the work.
#include <cstddef>
#include <cstdlib>
#include <memory>

#include "capi/api_guard.h"
#include "capi/comm_handle.h"
#include "capi/device_staging.h"
#include "capi/op_handle.h"
#include "capi/tls_params.h"
#include "core/dtype.h"
#include "core/quant.h"
#include "core/run_secret.h"
#include "net/endpoint.h"
#include "net/socket_options.h"
#include "peer/allreduce_retry.h"
#include "peer/communicator.h"

using ferry::Errc;
using ferry::Error;
using ferry::capi::c_enum_value;
using ferry::capi::checked_dtype;
using ferry::capi::guarded;
using ferry::capi::require;

namespace {

void check_range(uint64_t value, uint64_t lo, uint64_t hi, const char* name) {
  if (value < lo || value > hi)
    throw Error(Errc::invalid_argument, std::string(name) + " is " + std::to_string(value) + "; allowed " +
                                            std::to_string(lo) + ".." + std::to_string(hi));
}

ferry::peer::CommConfig to_config(const ferry_comm_params& p) {
  using std::chrono::milliseconds;
  ferry::peer::CommConfig c;
  const char* master_address = p.master_address ? p.master_address : std::getenv("FERRY_MASTER_ADDR");
  if (!master_address)
    throw Error(Errc::invalid_argument, "no master address: params->master_address is NULL and $FERRY_MASTER_ADDR is not set");
  std::string error;
  auto master = ferry::net::parse_endpoint(master_address, false, &error);
  if (!master)
    throw Error(Errc::invalid_argument,
                std::string(p.master_address ? "master_address: " : "$FERRY_MASTER_ADDR: ") + error);
  c.master = *master;
  c.peer_group = p.peer_group;
  check_range(p.p2p_connections, 0, 64, "p2p_connections");
  c.connections = p.p2p_connections;
  require(p.p2p_listen_host, "params->p2p_listen_host");
  c.listen_host = p.p2p_listen_host;
  if (c.listen_host.empty() || c.listen_host.size() > 255)
    throw Error(Errc::invalid_argument, "p2p_listen_host must be 1..255 characters");
  if (p.p2p_port_max < p.p2p_port_min)
    throw Error(Errc::invalid_argument, "p2p_port_max is below p2p_port_min");
  c.port_min = p.p2p_port_min;
  c.port_max = p.p2p_port_max;
  if (p.advertised_host) {
    c.advertised_host = p.advertised_host;
    if (c.advertised_host.size() > 255) throw Error(Errc::invalid_argument, "advertised_host is too long");
  }
  c.advertised_port = p.advertised_port;
  check_range(p.timeout_ms, 1, 86'400'000, "timeout_ms");
  check_range(p.progress_timeout_ms, 1, 86'400'000, "progress_timeout_ms");
  check_range(p.heartbeat_timeout_ms, 100, 3'600'000, "heartbeat_timeout_ms");
  check_range(p.io_threads, 1, 64, "io_threads");
  check_range(p.max_chunk_bytes, 4096, 64u << 20, "max_chunk_bytes");
  c.timeout = milliseconds(p.timeout_ms);
  c.progress_timeout = milliseconds(p.progress_timeout_ms);
  c.heartbeat_timeout = milliseconds(p.heartbeat_timeout_ms);
  check_range(p.master_reconnect_timeout_ms, 0, 86'400'000, "master_reconnect_timeout_ms");
  c.master_reconnect_timeout = milliseconds(p.master_reconnect_timeout_ms);
  check_range(p.master_connect_timeout_ms, 0, 86'400'000, "master_connect_timeout_ms");
  c.master_connect_timeout = milliseconds(p.master_connect_timeout_ms);
  c.io_threads = p.io_threads;
  c.max_chunk_bytes = p.max_chunk_bytes;
  check_range(p.shared_memory, 0, 1, "shared_memory");
  c.shared_memory = p.shared_memory != 0;
  check_range(p.dial_out_only, 0, 1, "dial_out_only");
  c.dial_out_only = p.dial_out_only != 0;
  check_range(p.refuse_relay, 0, 1, "refuse_relay");
  c.relay = p.refuse_relay == 0;
  if (auto secret = ferry::load_run_secret(p.secret_file))
    c.secret = std::make_shared<const ferry::RunSecret>(std::move(*secret));
  const char *cert = p.tls_cert_file, *key = p.tls_key_file, *ca = p.tls_ca_file;
  if (!cert && !key && !ca) {  // launchers set the environment once for every process (docs/operating.md, "Environment")
    cert = std::getenv("FERRY_TLS_CERT_FILE");
    key = std::getenv("FERRY_TLS_KEY_FILE");
    ca = std::getenv("FERRY_TLS_CA_FILE");
  }
  c.transport = ferry::capi::tls_transport_from(cert, key, ca, /*ca_required=*/true);
  if (p.congestion_control) {
    c.p2p_tuning.congestion_control = p.congestion_control;
    if (auto st = ferry::net::check_congestion_control(c.p2p_tuning.congestion_control); !st.ok())
      throw Error(st.code, st.message);
  }
  return c;
}

ferry::peer::AllreduceSpec to_spec(const ferry_allreduce_desc& d) {
  ferry::DType dtype = checked_dtype(d.dtype, "desc->dtype");
  if (!ferry::reduce_op_valid(static_cast<uint32_t>(c_enum_value(d.op))))
    throw Error(Errc::invalid_argument, "desc->op " + std::to_string(c_enum_value(d.op)) + " is not a ferry_reduce_op");
  ferry::peer::AllreduceSpec spec{dtype, static_cast<ferry::ReduceOp>(d.op), d.tag, {}};
  if (!ferry::quant_valid(static_cast<uint32_t>(c_enum_value(d.quant))))
    throw Error(Errc::invalid_argument, "desc->quant " + std::to_string(c_enum_value(d.quant)) + " is not a ferry_quant");
  spec.quant.kind = static_cast<ferry::Quant>(d.quant);
  spec.quant.block = d.quant_block == 0 ? ferry::kDefaultQuantBlock : d.quant_block;
  if (spec.quant.kind == ferry::Quant::none) return spec;
  if (spec.quant.block > ferry::kMaxQuantBlock)
    throw Error(Errc::invalid_argument, "desc->quant_block must be 1.." + std::to_string(ferry::kMaxQuantBlock));
  bool wide = spec.dtype == ferry::DType::f32 || spec.dtype == ferry::DType::f64;
  bool half = spec.dtype == ferry::DType::f16 || spec.dtype == ferry::DType::bf16;
  bool half_wire = spec.quant.kind == ferry::Quant::f16 || spec.quant.kind == ferry::Quant::bf16;
  if (ferry::quant_is_int_domain(spec.quant.kind) && spec.op != ferry::ReduceOp::sum && spec.op != ferry::ReduceOp::avg)
    throw Error(Errc::invalid_argument, std::string("quantization ") + std::string(ferry::quant_name(spec.quant.kind)) +
                                            " sums integers: it takes FERRY_OP_SUM or FERRY_OP_AVG, not " +
                                            std::string(ferry::reduce_op_name(spec.op)));
  if (!wide && !(half && !half_wire))
    throw Error(Errc::invalid_argument, std::string("quantization to ") + std::string(ferry::quant_name(spec.quant.kind)) +
                                            " does not apply to " + std::string(ferry::dtype_name(spec.dtype)) +
                                            " data (float data only; f16/bf16 wire types need f32 or f64)");
  return spec;
}

void check_buffers(const void* send, void* recv, size_t count, ferry::DType dtype) {
  if (count == 0) return;
  require(send, "send");
  require(recv, "recv");
  size_t elem = ferry::dtype_size(dtype);
  if (count > SIZE_MAX / elem) throw Error(Errc::invalid_argument, "count * element size overflows");
  auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  size_t bytes = count * elem;
  if (s != r && s < r + bytes && r < s + bytes)
    throw Error(Errc::invalid_argument, "send and recv overlap without being the same buffer");
}

}  // namespace

namespace ferry::capi {

void fill_info(ferry_op_info* info, const ferry::peer::OpInfo& from) {
  if (!info) return;
  ferry_op_info full{};
  full.world_size = from.world_size;
  full.bytes_sent = from.bytes_sent;
  full.bytes_received = from.bytes_received;
  full.duration_s = from.duration_s;
  full.start_s = from.phases.start_s;
  full.longest_stall_s = from.phases.longest_stall_s;
  full.commit_s = from.phases.commit_s;
  full.quant_agreement_s = from.agreement_s;
  ferry::capi::write_versioned(info, info->struct_size, full);
}

void check_info(const ferry_op_info* info) {
  if (info && info->struct_size < sizeof(uint32_t))
    throw Error(Errc::invalid_argument, "info->struct_size is not set");
}

}  // namespace ferry::capi

using ferry::capi::check_info;
using ferry::capi::fill_info;

extern "C" {

static void comm_params_defaults(ferry_comm_params* params) {
  if (!params) return;
  *params = ferry_comm_params{};
  params->struct_size = sizeof(ferry_comm_params);
  params->peer_group = 0;
  params->p2p_connections = 0;
  params->p2p_listen_host = "::";
  params->timeout_ms = 60000;
  params->progress_timeout_ms = 20000;
  params->heartbeat_timeout_ms = 10000;
  params->io_threads = 2;
  params->max_chunk_bytes = 256u << 10;
  params->shared_memory = 1;
  params->master_reconnect_timeout_ms = 300000;
  params->master_connect_timeout_ms = 60000;
}

void ferry_comm_params_init_sized(ferry_comm_params* params, uint32_t struct_size) {
  ferry::capi::init_versioned(params, struct_size, comm_params_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_comm_params_init)(ferry_comm_params* params) {
  ferry_comm_params_init_sized(params, ferry::capi::kSizeIn040<ferry_comm_params>);
}

ferry_result ferry_comm_create(const ferry_comm_params* params, ferry_comm** out) {
  return guarded([&] {
    require(out, "out");
    *out = nullptr;
    auto config = to_config(ferry::capi::read_versioned(params, comm_params_defaults, "params"));
    auto comm = std::make_unique<ferry_comm>();
    comm->impl = std::make_unique<ferry::peer::Communicator>(std::move(config));
    *out = comm.release();
  });
}

ferry_result ferry_comm_abort(ferry_comm* comm) {
  return guarded([&] {
    require(comm, "comm");
    comm->impl->abort();
  });
}

ferry_result ferry_connect(ferry_comm* comm) {
  return guarded([&] {
    require(comm, "comm");
    comm->impl->connect();
  });
}

ferry_result ferry_update_topology(ferry_comm* comm) {
  return guarded([&] {
    require(comm, "comm");
    comm->impl->update_topology();
  });
}

ferry_result ferry_wait_for_world(ferry_comm* comm, uint32_t min_peers, uint32_t timeout_ms) {
  return guarded([&] {
    require(comm, "comm");
    if (min_peers == 0) throw Error(Errc::invalid_argument, "min_peers is 0; a group holds at least this peer");
    if (timeout_ms > 86'400'000) throw Error(Errc::invalid_argument, "timeout_ms is above 86400000 (a day)");
    comm->impl->wait_for_world(min_peers, timeout_ms == 0 ? std::nullopt
                                                          : std::optional(std::chrono::milliseconds(timeout_ms)));
  });
}

ferry_result ferry_optimize_topology(ferry_comm* comm) {
  return guarded([&] {
    require(comm, "comm");
    comm->impl->update_topology(/*optimize=*/true);
  });
}

ferry_result ferry_peers_pending(ferry_comm* comm, uint32_t* pending) {
  return guarded([&] {
    require(comm, "comm");
    require(pending, "pending");
    *pending = comm->impl->peers_pending();
  });
}

ferry_result ferry_comm_get_attribute(const ferry_comm* comm, ferry_attribute attribute, int64_t* value) {
  return guarded([&] {
    require(comm, "comm");
    require(value, "value");
    auto a = comm->impl->attributes();
    switch (c_enum_value(attribute)) {
      case FERRY_ATTR_GLOBAL_WORLD_SIZE: *value = a.global_world; return;
      case FERRY_ATTR_GROUP_WORLD_SIZE: *value = a.group_world; return;
      case FERRY_ATTR_NUM_GROUPS: *value = a.num_groups; return;
      case FERRY_ATTR_LARGEST_GROUP_SIZE: *value = a.largest_group; return;
      case FERRY_ATTR_RANK: *value = a.rank; return;
      case FERRY_ATTR_PEER_GROUP: *value = a.peer_group; return;
      case FERRY_ATTR_PEER_ID: *value = a.peer_id; return;
      case FERRY_ATTR_EPOCH: *value = a.epoch; return;
      case FERRY_ATTR_SHARED_MEMORY_LANES: *value = a.shared_memory_lanes; return;
      case FERRY_ATTR_NEXT_LINK_RELAY: *value = a.next_link_relay; return;
      case FERRY_ATTR_RELAYED_BYTES: *value = a.relayed_bytes; return;
    }
    throw Error(Errc::invalid_argument, "unknown attribute " + std::to_string(c_enum_value(attribute)));
  });
}

ferry_result ferry_comm_ring(const ferry_comm* comm, uint64_t* ids, size_t capacity, size_t* count) {
  return guarded([&] {
    require(comm, "comm");
    require(count, "count");
    if (capacity > 0) require(ids, "ids");
    auto a = comm->impl->attributes();
    *count = a.ring.size();
    std::copy_n(a.ring.begin(), std::min(capacity, a.ring.size()), ids);
  });
}

void ferry_comm_destroy(ferry_comm* comm) {
  if (!comm) return;
  // Not guarded(): a void cleanup call must leave the thread's last error as it was.
  try {
    comm->impl.reset();
  } catch (...) {  // a failure to leave cleanly still frees the handle
  }
  delete comm;
}

static void allreduce_desc_defaults(ferry_allreduce_desc* desc) {
  if (!desc) return;
  *desc = ferry_allreduce_desc{};
  desc->struct_size = sizeof(ferry_allreduce_desc);
  desc->dtype = FERRY_F32;
  desc->op = FERRY_OP_SUM;
  desc->tag = 0;
  desc->quant = FERRY_QUANT_NONE;
  desc->quant_block = 0;
  desc->device = FERRY_DEVICE_CPU;
  desc->device_index = 0;
  desc->cuda_stream = nullptr;
}

void ferry_allreduce_desc_init_sized(ferry_allreduce_desc* desc, uint32_t struct_size) {
  ferry::capi::init_versioned(desc, struct_size, allreduce_desc_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_allreduce_desc_init)(ferry_allreduce_desc* desc) {
  ferry_allreduce_desc_init_sized(desc, ferry::capi::kSizeIn040<ferry_allreduce_desc>);
}

namespace {

ferry_op issue(ferry_comm* comm, const void* send, void* recv, size_t count, const ferry_allreduce_desc* desc) {
  require(comm, "comm");
  auto d = ferry::capi::read_versioned(desc, allreduce_desc_defaults, "desc");
  auto spec = to_spec(d);
  check_buffers(send, recv, count, spec.dtype);
  ferry_op op;
  if (c_enum_value(d.device) != FERRY_DEVICE_CPU) {
    ferry::capi::check_device(c_enum_value(d.device), d.device_index, send, "desc->device (send)");
    ferry::capi::check_device(c_enum_value(d.device), d.device_index, recv, "desc->device (recv)");
    op.staged = std::make_unique<ferry::capi::StagedBuffer>(d.device_index, d.cuda_stream, send,
                                                            count * ferry::dtype_size(spec.dtype), false);
    op.device_recv = recv;
    send = recv = count > 0 ? op.staged->host() : nullptr;
  }
  op.impl = comm->impl->allreduce_async(send, recv, count, spec);
  return op;
}

void finish(const std::shared_ptr<ferry::peer::AllreduceOp>& op, ferry_op_info* info) {
  ferry::peer::OpInfo result;
  ferry::Status st = op->wait(&result);
  fill_info(info, result);
  if (!st.ok()) throw Error(st.code, st.message);
}

void finish_op(ferry_op& op, ferry_op_info* info) {
  if (op.gather) return ferry::capi::finish_gather(op, info);
  finish(op.impl, info);
  if (op.staged && op.device_recv) op.staged->deliver(op.device_recv);
}

}  // namespace

ferry_result ferry_allreduce(ferry_comm* comm, const void* send, void* recv, size_t count,
                             const ferry_allreduce_desc* desc, ferry_op_info* info) {
  return guarded([&] {
    check_info(info);
    ferry_op op = issue(comm, send, recv, count, desc);
    finish_op(op, info);
  });
}

ferry_result ferry_allreduce_async(ferry_comm* comm, const void* send, void* recv, size_t count,
                                   const ferry_allreduce_desc* desc, ferry_op** op) {
  return guarded([&] {
    require(op, "op");
    *op = nullptr;
    auto handle = std::make_unique<ferry_op>(issue(comm, send, recv, count, desc));
    *op = handle.release();
  });
}

ferry_result ferry_barrier(ferry_comm* comm) {
  return guarded([&] {
    require(comm, "comm");
    ferry::peer::AllreduceSpec spec;
    spec.dtype = ferry::DType::u8;
    spec.kind = ferry::wire::CollectiveKind::barrier;
    finish(comm->impl->allreduce_async(nullptr, nullptr, 0, spec), nullptr);
  });
}

ferry_result ferry_broadcast(ferry_comm* comm, void* buffer, size_t bytes, uint32_t root, ferry_op_info* info) {
  return guarded([&] {
    require(comm, "comm");
    check_info(info);
    if (bytes > 0) require(buffer, "buffer");
    ferry::peer::AllreduceSpec spec;
    spec.dtype = ferry::DType::u8;
    spec.op = ferry::ReduceOp::sum;
    spec.kind = ferry::wire::CollectiveKind::broadcast;
    spec.root = root;
    finish(comm->impl->allreduce_async(buffer, buffer, bytes, spec), info);
  });
}

ferry_result ferry_op_test(ferry_op* op, int* done) {
  return guarded([&] {
    require(op, "op");
    require(done, "done");
    *done = (op->gather ? op->gather->finished() : op->impl->finished()) ? 1 : 0;
  });
}

ferry_result ferry_op_wait(ferry_op* op, ferry_op_info* info) {
  if (!op) return ferry::capi::fail(Errc::invalid_argument, "op is NULL");
  // A bad info leaves the op untouched (still in flight, still the caller's to wait).
  if (ferry_result r = guarded([&] { check_info(info); }); r != FERRY_OK) return r;
  std::unique_ptr<ferry_op> owned(op);  // from here released whatever the outcome: exactly once
  return guarded([&] { finish_op(*owned, info); });
}

static void allreduce_job_defaults(ferry_allreduce_job* job) {
  if (!job) return;
  *job = ferry_allreduce_job{};
  job->struct_size = sizeof(ferry_allreduce_job);
  ferry_allreduce_desc_init(&job->desc);
}

void ferry_allreduce_job_init_sized(ferry_allreduce_job* job, uint32_t struct_size) {
  ferry::capi::init_versioned(job, struct_size, allreduce_job_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_allreduce_job_init)(ferry_allreduce_job* job) {
  ferry_allreduce_job_init_sized(job, ferry::capi::kSizeIn040<ferry_allreduce_job>);
}

ferry_result ferry_allreduce_multiple_with_retry(ferry_comm* comm, const ferry_allreduce_job* jobs, size_t n,
                                                 uint32_t max_in_flight, ferry_op_info* info) {
  return guarded([&] {
    require(comm, "comm");
    check_info(info);
    if (n > 0) require(jobs, "jobs");
    if (comm->impl->ops_in_flight() > 0)
      throw Error(Errc::invalid_usage, "ferry_allreduce_multiple_with_retry with collectives already in flight");
    std::vector<ferry::peer::AllreduceJob> parsed;
    const auto* base = reinterpret_cast<const uint8_t*>(jobs);
    size_t stride = n > 0 ? jobs->struct_size : 0;
    for (size_t i = 0; i < n; ++i) {
      auto job = ferry::capi::read_versioned(reinterpret_cast<const ferry_allreduce_job*>(base + i * stride),
                                             allreduce_job_defaults, "jobs[i]");
      auto desc = ferry::capi::read_versioned(&job.desc, allreduce_desc_defaults, "jobs[i].desc");
      if (c_enum_value(desc.device) != FERRY_DEVICE_CPU)
        throw Error(Errc::invalid_argument, "jobs[" + std::to_string(i) +
                                                "].desc.device: ferry_allreduce_multiple_with_retry takes host buffers only");
      auto spec = to_spec(desc);
      check_buffers(job.send, job.recv, job.count, spec.dtype);
      parsed.push_back({job.send, job.recv, job.count, spec});
    }
    ferry::peer::RetryPolicy policy;
    policy.max_in_flight = max_in_flight == 0 ? 4 : max_in_flight;
    ferry::peer::OpInfo total;
    ferry::Status st = ferry::peer::allreduce_with_retry(*comm->impl, parsed, policy, &total);
    fill_info(info, total);
    if (!st.ok()) throw Error(st.code, st.message);
  });
}

}  // extern "C"
