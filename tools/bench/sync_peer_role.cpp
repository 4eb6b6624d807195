#include "sync_peer_role.h"

#include <ferry/ferry.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "input_pattern.h"  // tools/common
#include "json.h"  // tools/common
#include "peer_session.h"
#include "process_cpu.h"  // tools/common
#include "sync_content.h"

namespace ferry::bench {

namespace {

struct SyncRecord {
  std::vector<double> times_s, sync_duration_s, bytes_received, bytes_sent, tensors_changed;
  std::vector<std::string> hashes;
  double cpu_s = 0;
};

class SyncPeer {
 public:
  SyncPeer(const BenchArgs& args, PeerSession& session, std::FILE* reports)
      : args_(args), session_(session), reports_(reports), newcomer_(is_sync_newcomer(args)) {}

  // Returns false when the newcomer's state was not the holders' after some sync.
  bool run_all_sizes() {
    bool all_correct = true;
    for (const std::size_t bytes : args_.sizes) all_correct = run_size(bytes) && all_correct;
    return all_correct;
  }

 private:
  bool run_size(std::size_t bytes) {
    const std::size_t element = elem_type_size(args_.dtype);
    const std::size_t count = bytes / element;
    Buffer state = allocate(bytes);
    if (newcomer_) {
      fill_weights(state.get(), bytes, kNewcomerSeed);
    } else {
      try {
        fill_holder_state(args_.state_file, state.get(), bytes);
      } catch (const std::runtime_error& e) {
        throw PeerFailure(e.what());
      }
    }
    // T tensors of count / T elements, the last taking the remainder.
    const std::size_t tensors = std::min<std::size_t>(args_.tensors, count);
    std::vector<std::string> names;
    std::vector<ferry_tensor> declared(tensors);
    for (std::size_t t = 0; t < tensors; ++t) {
      char name[24];
      std::snprintf(name, sizeof name, "t%04zu", t);
      names.emplace_back(name);
    }
    for (std::size_t t = 0; t < tensors; ++t) {
      ferry_tensor_init(&declared[t]);
      declared[t].name = names[t].c_str();
      declared[t].data = state.get() + t * (count / tensors) * element;
      declared[t].count = t + 1 < tensors ? count / tensors : count - t * (count / tensors);
      declared[t].dtype = ferry_dtype_of(args_.dtype);
    }

    SyncRecord record;
    const std::string holders_hash = newcomer_ ? "" : tooling::hash_hex(state.get(), bytes);
    for (int iteration = 0; iteration < args_.warmup + args_.iters; ++iteration) {
      const bool timed = iteration >= args_.warmup;
      if (newcomer_ && iteration > 0) {
        for (const ferry_tensor& t : declared) static_cast<unsigned char*>(t.data)[0] ^= 0xFF;
      }
      ferry_shared_state shared;
      ferry_shared_state_init(&shared);
      shared.tensors = declared.data();
      shared.count = declared.size();
      shared.revision = newcomer_ ? 0 : ++revision_;
      shared.compression_level = args_.compression;
      ferry_sync_info info;
      std::memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;

      session_.barrier();
      const double cpu_before = tooling::process_cpu_s();
      const auto start = std::chrono::steady_clock::now();
      must(ferry_sync_shared_state(session_.comm(), &shared,
                                   newcomer_ ? FERRY_SYNC_RECEIVE_ONLY : FERRY_SYNC_ENFORCE_POPULAR, &info),
           "ferry_sync_shared_state (iteration " + std::to_string(iteration) + ")");
      const auto stop = std::chrono::steady_clock::now();
      const double cpu_after = tooling::process_cpu_s();
      revision_ = info.revision;
      if (!timed) continue;
      record.times_s.push_back(std::chrono::duration<double>(stop - start).count());
      record.sync_duration_s.push_back(info.duration_s);
      record.bytes_received.push_back(static_cast<double>(info.bytes_received));
      record.bytes_sent.push_back(static_cast<double>(info.bytes_sent));
      record.tensors_changed.push_back(info.tensors_changed);
      record.cpu_s += cpu_after - cpu_before;
      record.hashes.push_back(newcomer_ ? tooling::hash_hex(state.get(), bytes) : holders_hash);
    }
    print(bytes, tensors, record);
    session_.log("%s %s done (%d iterations)", newcomer_ ? "newcomer" : "holder", format_byte_size(bytes).c_str(),
                 args_.iters);
    // The newcomer cannot know the holders' hash; the orchestrator compares. A
    // holder's bytes must not have moved.
    return newcomer_ || tooling::hash_hex(state.get(), bytes) == holders_hash;
  }

  void print(std::size_t bytes, std::size_t tensors, const SyncRecord& record) {
    tooling::JsonWriter json;
    json.begin_object();
    json.key("impl").value("ferry-sync");
    json.key("role").value(newcomer_ ? "newcomer" : "holder");
    json.key("peer_index").value(args_.peer_index);
    json.key("world").value(session_.world());
    json.key("bytes").value(static_cast<std::uint64_t>(bytes));
    json.key("tensors").value(static_cast<std::uint64_t>(tensors));
    json.key("compression").value(args_.compression);
    const std::pair<const char*, const std::vector<double>*> series[] = {
        {"times_s", &record.times_s},         {"sync_duration_s", &record.sync_duration_s},
        {"bytes_received", &record.bytes_received}, {"bytes_sent", &record.bytes_sent},
        {"tensors_changed", &record.tensors_changed}};
    for (const auto& [name, values] : series) {
      json.key(name).begin_array();
      for (const double v : *values) json.value(v);
      json.end_array();
    }
    json.key("cpu_s").value(record.cpu_s);
    json.key("hashes").begin_array();
    for (const std::string& hash : record.hashes) json.value(hash);
    json.end_array();
    json.end_object();
    std::fprintf(reports_, "%s\n", json.str().c_str());
    std::fflush(reports_);
  }

  const BenchArgs& args_;
  PeerSession& session_;
  std::FILE* const reports_;
  const bool newcomer_;
  std::uint64_t revision_ = 0;  // the group's, after the last sync
};

}  // namespace

int run_sync_peer(const BenchArgs& args) {
  return run_peer_process(args, [&](PeerSession& session, std::FILE* reports) {
    return SyncPeer(args, session, reports).run_all_sizes();
  });
}

}  // namespace ferry::bench
