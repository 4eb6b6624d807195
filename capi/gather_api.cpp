// ferry_all_gather and its result: argument checks and translation only;
// peer/gather_op.h does the work.
#include <cstring>
#include <memory>

#include "capi/api_guard.h"
#include "capi/comm_handle.h"
#include "capi/op_handle.h"

using ferry::Errc;
using ferry::Error;
using ferry::capi::guarded;
using ferry::capi::require;

namespace ferry::capi {

void finish_gather(ferry_op& op, ferry_op_info* info) {
  peer::OpInfo result;
  Status st = op.gather->wait(&result);
  fill_info(info, result);
  if (!st.ok()) throw Error(st.code, st.message);
}

}  // namespace ferry::capi

namespace {

void all_gather_desc_defaults(ferry_all_gather_desc* desc) {
  if (!desc) return;
  *desc = ferry_all_gather_desc{};
  desc->struct_size = sizeof(ferry_all_gather_desc);
  desc->tag = 0;
}

// Issues the all-gather; `op` gets the operation, `*result` a new handle on its result.
ferry_op issue(ferry_comm* comm, const void* send, size_t bytes, const ferry_all_gather_desc* desc,
               ferry_gathered** result) {
  require(comm, "comm");
  require(result, "result");
  *result = nullptr;
  auto d = ferry::capi::read_versioned(desc, all_gather_desc_defaults, "desc");
  if (bytes > 0) require(send, "send");
  auto gathered = std::make_unique<ferry_gathered>();
  gathered->bytes = std::make_shared<ferry::peer::GatheredBytes>();
  ferry_op op;
  op.gather = comm->impl->all_gather_async(send, bytes, d.tag, gathered->bytes);
  *result = gathered.release();
  return op;
}

const ferry::peer::GatheredBytes& ready(const ferry_gathered* gathered) {
  require(gathered, "gathered");
  if (!gathered->bytes->ready.load(std::memory_order_acquire))
    throw Error(Errc::invalid_usage, "the all-gather has not succeeded (not yet waited, or it failed): no result");
  return *gathered->bytes;
}

}  // namespace

extern "C" {

void ferry_all_gather_desc_init_sized(ferry_all_gather_desc* desc, uint32_t struct_size) {
  ferry::capi::init_versioned(desc, struct_size, all_gather_desc_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_all_gather_desc_init)(ferry_all_gather_desc* desc) {
  ferry_all_gather_desc_init_sized(desc, ferry::capi::kSizeIn040<ferry_all_gather_desc>);
}

ferry_result ferry_all_gather(ferry_comm* comm, const void* send, size_t bytes, const ferry_all_gather_desc* desc,
                              ferry_gathered** result, ferry_op_info* info) {
  ferry_gathered* out = nullptr;
  ferry_result r = guarded([&] {
    require(result, "result");
    ferry::capi::check_info(info);
    ferry_op op = issue(comm, send, bytes, desc, &out);
    ferry::capi::finish_gather(op, info);
  });
  if (result) *result = r == FERRY_OK ? out : nullptr;
  if (r != FERRY_OK) ferry_gathered_destroy(out);
  return r;
}

ferry_result ferry_all_gather_async(ferry_comm* comm, const void* send, size_t bytes,
                                    const ferry_all_gather_desc* desc, ferry_gathered** result, ferry_op** op) {
  ferry_gathered* out = nullptr;
  ferry_result r = guarded([&] {
    require(result, "result");
    require(op, "op");
    *op = nullptr;
    auto handle = std::make_unique<ferry_op>(issue(comm, send, bytes, desc, &out));
    *op = handle.release();
  });
  if (result) *result = r == FERRY_OK ? out : nullptr;
  if (r != FERRY_OK) ferry_gathered_destroy(out);
  return r;
}

ferry_result ferry_gathered_layout(const ferry_gathered* gathered, uint32_t* members, const void** data,
                                   size_t* total_bytes) {
  return guarded([&] {
    const auto& g = ready(gathered);
    if (members) *members = static_cast<uint32_t>(g.sizes.size());
    if (data) *data = g.data();
    if (total_bytes) *total_bytes = g.total;
  });
}

ferry_result ferry_gathered_part(const ferry_gathered* gathered, uint32_t rank, const void** data, size_t* bytes) {
  return guarded([&] {
    const auto& g = ready(gathered);
    if (rank >= g.sizes.size())
      throw Error(Errc::invalid_argument, "rank " + std::to_string(rank) + " is not a member of this all-gather of " +
                                              std::to_string(g.sizes.size()));
    if (data) *data = g.data() + g.offsets[rank];
    if (bytes) *bytes = static_cast<size_t>(g.sizes[rank]);
  });
}

void ferry_gathered_destroy(ferry_gathered* gathered) { delete gathered; }

}  // extern "C"
