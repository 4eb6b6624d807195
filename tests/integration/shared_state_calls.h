// Shared-state syncs through the C API for the integration tests: a peer's
// named f32 tensors, one sync of them, and what it reported.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/content_hash.h"
#include "ferry/ferry.h"

namespace ferry::test {

// A peer's state: named f32 tensors it owns.
struct State {
  std::map<std::string, std::vector<float>> tensors;
  std::set<std::string> may_differ;
  uint64_t revision = 0;

  void fill(const std::string& name, size_t count, float base) {
    auto& t = tensors[name];
    t.resize(count);
    for (size_t i = 0; i < count; ++i) t[i] = base + static_cast<float>(i % 1000);
  }
  uint64_t hash(const std::string& name) const {
    const auto& t = tensors.at(name);
    return ferry::content_hash(t.data(), t.size() * sizeof(float));
  }
};

struct SyncResult {
  ferry_result result = FERRY_OK;
  ferry_sync_info info{};
  std::map<std::string, int> changed;
  std::string error;
};

inline SyncResult sync(ferry_comm* comm, State& state, ferry_sync_strategy strategy, uint32_t compression = 0) {
  std::vector<ferry_tensor> tensors;
  for (auto& [name, data] : state.tensors) {
    ferry_tensor t;
    ferry_tensor_init(&t);
    t.name = name.c_str();
    t.data = data.data();
    t.count = data.size();
    t.dtype = FERRY_F32;
    t.allow_content_inequality = state.may_differ.count(name) ? 1 : 0;
    tensors.push_back(t);
  }
  ferry_shared_state s;
  ferry_shared_state_init(&s);
  s.revision = state.revision;
  s.tensors = tensors.data();
  s.count = tensors.size();
  s.compression_level = compression;
  SyncResult out;
  out.info.struct_size = sizeof out.info;
  out.result = ferry_sync_shared_state(comm, &s, strategy, &out.info);
  if (out.result != FERRY_OK) out.error = ferry_last_error();
  state.revision = s.revision;
  for (auto& t : tensors) out.changed[t.name] = t.changed;
  return out;
}

inline SyncResult must_sync(ferry_comm* comm, State& state, ferry_sync_strategy strategy, uint32_t compression = 0) {
  SyncResult r = sync(comm, state, strategy, compression);
  if (r.result != FERRY_OK) throw std::runtime_error("ferry_sync_shared_state: " + r.error);
  return r;
}

}  // namespace ferry::test
