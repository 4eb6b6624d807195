#include "one_tensor_state.h"

namespace ferry::tooling {

ferry_result sync_one_tensor(ferry_comm* comm, const char* name, void* data, std::size_t count, ferry_dtype dtype,
                             std::uint64_t& revision, ferry_sync_strategy strategy, ferry_sync_info* info,
                             int* changed) {
  ferry_tensor tensor;
  ferry_tensor_init(&tensor);
  tensor.name = name;
  tensor.data = data;
  tensor.count = count;
  tensor.dtype = dtype;
  ferry_shared_state state;
  ferry_shared_state_init(&state);
  state.revision = revision;
  state.tensors = &tensor;
  state.count = 1;
  const ferry_result r = ferry_sync_shared_state(comm, &state, strategy, info);
  revision = state.revision;
  if (changed != nullptr) *changed = tensor.changed;
  return r;
}

}  // namespace ferry::tooling
