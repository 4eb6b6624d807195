// ferry_sync_shared_state: the descriptors checked and translated (a tensor on a
// CUDA device is staged in host memory and hashed there), then peer/ syncs.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "capi/api_guard.h"
#include "capi/comm_handle.h"
#include "capi/device_staging.h"
#include "core/dtype.h"
#include "peer/communicator.h"

using ferry::Errc;
using ferry::Error;
using ferry::capi::c_enum_value;
using ferry::capi::checked_dtype;
using ferry::capi::guarded;
using ferry::capi::require;

extern "C" {

static void tensor_defaults(ferry_tensor* tensor) {
  if (!tensor) return;
  *tensor = ferry_tensor{};
  tensor->struct_size = sizeof(ferry_tensor);
  tensor->dtype = FERRY_F32;
  tensor->device = FERRY_DEVICE_CPU;
  tensor->device_index = 0;
}

void ferry_tensor_init_sized(ferry_tensor* tensor, uint32_t struct_size) {
  ferry::capi::init_versioned(tensor, struct_size, tensor_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_tensor_init)(ferry_tensor* tensor) {
  ferry_tensor_init_sized(tensor, ferry::capi::kSizeIn040<ferry_tensor>);
}

static void shared_state_defaults(ferry_shared_state* state) {
  if (!state) return;
  *state = ferry_shared_state{};
  state->struct_size = sizeof(ferry_shared_state);
}

void ferry_shared_state_init_sized(ferry_shared_state* state, uint32_t struct_size) {
  ferry::capi::init_versioned(state, struct_size, shared_state_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_shared_state_init)(ferry_shared_state* state) {
  ferry_shared_state_init_sized(state, ferry::capi::kSizeIn040<ferry_shared_state>);
}

ferry_result ferry_sync_shared_state(ferry_comm* comm, ferry_shared_state* state, ferry_sync_strategy strategy,
                                     ferry_sync_info* info) {
  return guarded([&] {
    require(comm, "comm");
    auto s = ferry::capi::read_versioned(state, shared_state_defaults, "state");
    if (info && info->struct_size < sizeof(uint32_t)) throw Error(Errc::invalid_argument, "info->struct_size is not set");
    if (c_enum_value(strategy) < FERRY_SYNC_ENFORCE_POPULAR || c_enum_value(strategy) > FERRY_SYNC_SEND_ONLY)
      throw Error(Errc::invalid_argument, "strategy is not a ferry_sync_strategy");
    if (s.count > 0) require(s.tensors, "state->tensors");
    if (s.compression_level > 19) throw Error(Errc::invalid_argument, "compression_level must be 0..19");
    ferry::peer::SyncSpec spec;
    spec.revision = s.revision;
    spec.strategy = static_cast<ferry::wire::SyncStrategy>(strategy);
    spec.compression_level = s.compression_level;
    auto* base = reinterpret_cast<uint8_t*>(s.tensors);
    size_t stride = s.count > 0 ? s.tensors->struct_size : 0;
    std::vector<ferry_tensor*> given;
    std::vector<std::unique_ptr<ferry::capi::StagedBuffer>> staged;  // by caller's index; null for host tensors
    std::set<std::string> names;
    for (size_t i = 0; i < s.count; ++i) {
      auto* raw = reinterpret_cast<ferry_tensor*>(base + i * stride);
      auto t = ferry::capi::read_versioned(raw, tensor_defaults, "state->tensors[i]");
      std::string where = "state->tensors[" + std::to_string(i) + "]";
      require(t.name, (where + ".name").c_str());
      std::string name = t.name;
      if (name.empty() || name.size() > 255) throw Error(Errc::invalid_argument, where + ".name must be 1..255 bytes");
      if (!names.insert(name).second) throw Error(Errc::invalid_argument, "two tensors are named '" + name + "'");
      ferry::DType dtype = checked_dtype(t.dtype, where + ".dtype");
      if (t.count > 0) require(t.data, (where + ".data").c_str());
      if (t.count > SIZE_MAX / ferry::dtype_size(dtype)) throw Error(Errc::invalid_argument, where + " is too large");
      ferry::capi::check_device(c_enum_value(t.device), t.device_index, t.data, where + ".device ('" + name + "')");
      spec.tensors.push_back({name, t.data, t.count, dtype, t.allow_content_inequality != 0});
      given.push_back(raw);
      staged.emplace_back();
      if (c_enum_value(t.device) == FERRY_DEVICE_CPU) continue;
      // Staged in host memory, hashed on the device; delivered back only when the sync overwrites it.
      staged.back() = std::make_unique<ferry::capi::StagedBuffer>(t.device_index, s.cuda_stream, t.data,
                                                                  t.count * ferry::dtype_size(dtype),
                                                                  t.allow_content_inequality == 0);
      spec.tensors.back().data = staged.back()->host();
      if (t.allow_content_inequality == 0) spec.tensors.back().block_hashes = staged.back()->block_hashes();
    }
    auto op = comm->impl->sync_shared_state(std::move(spec));
    ferry::peer::SyncOutcome outcome;
    ferry::Status st = op->wait(&outcome);
    uint32_t changed = 0;
    for (size_t i = 0; i < given.size(); ++i) {
      int flag = i < outcome.changed.size() && outcome.changed[i] ? 1 : 0;
      changed += static_cast<uint32_t>(flag);
      if (given[i]->struct_size >= offsetof(ferry_tensor, changed) + sizeof(int)) given[i]->changed = flag;
    }
    if (info) {
      ferry_sync_info full{};
      full.bytes_sent = outcome.bytes_sent;
      full.bytes_received = outcome.bytes_received;
      full.tensors_changed = changed;
      full.revision = outcome.revision;
      full.duration_s = outcome.duration_s;
      ferry::capi::write_versioned(info, info->struct_size, full);
    }
    if (!st.ok()) throw Error(st.code, st.message);
    for (size_t i = 0; i < given.size(); ++i)
      if (staged[i] && i < outcome.changed.size() && outcome.changed[i]) staged[i]->deliver(given[i]->data);
    state->revision = outcome.revision;
  });
}

}  // extern "C"
