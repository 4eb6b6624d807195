#include "gather_bench.h"

#include <cstring>

#include "input_pattern.h"

namespace ferry::bench {

using tooling::fill_input;
using tooling::hash_hex;
using tooling::op_seed;

GatherRounds::GatherRounds(const BenchArgs& args, PeerSession& session, std::size_t bytes)
    : args_(args), session_(session), bytes_(bytes), results_(args.concurrent, nullptr) {
  const std::size_t count = bytes / elem_type_size(args.dtype);
  for (std::uint32_t k = 0; k < args.concurrent; ++k) {
    send_.push_back(allocate(bytes));
    fill_input(args.dtype, args.op, send_.back().get(), count, op_seed(k), session.rank());
  }
}

GatherRounds::~GatherRounds() { drop_results(); }

void GatherRounds::drop_results() {
  for (ferry_gathered*& result : results_) {
    ferry_gathered_destroy(result);
    result = nullptr;
  }
}

std::uint64_t GatherRounds::run_iteration() {
  std::vector<ferry_op*> ops(send_.size(), nullptr);
  std::string failure;
  for (std::size_t k = 0; k < send_.size(); ++k) {
    ferry_all_gather_desc desc;
    ferry_all_gather_desc_init(&desc);
    desc.tag = k;
    const ferry_result issued =
        ferry_all_gather_async(session_.comm(), send_[k].get(), bytes_, &desc, &results_[k], &ops[k]);
    if (issued != FERRY_OK) {
      failure = "ferry_all_gather_async (tag " + std::to_string(k) + "): " + ferry_strerror(issued) + ": " +
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
    if (waited != FERRY_OK && failure.empty())
      failure = "all-gather (tag " + std::to_string(k) + "): " + ferry_strerror(waited) + ": " + ferry_last_error();
    sent += info.bytes_sent;
  }
  if (!failure.empty()) throw PeerFailure(failure);
  return sent;
}

std::string GatherRounds::hash(std::uint32_t k) const {
  const void* data = nullptr;
  std::size_t total = 0;
  if (ferry_gathered_layout(results_[k], nullptr, &data, &total) != FERRY_OK) return "none";
  return hash_hex(data, total);
}

bool GatherRounds::correct(std::uint32_t k) const {
  std::uint32_t members = 0;
  if (ferry_gathered_layout(results_[k], &members, nullptr, nullptr) != FERRY_OK ||
      static_cast<int>(members) != session_.world())
    return false;
  const std::size_t count = bytes_ / elem_type_size(args_.dtype);
  Buffer expected = allocate(bytes_);
  for (std::uint32_t r = 0; r < members; ++r) {
    const void* part = nullptr;
    std::size_t bytes = 0;
    fill_input(args_.dtype, args_.op, expected.get(), count, op_seed(k), static_cast<int>(r));
    if (ferry_gathered_part(results_[k], r, &part, &bytes) != FERRY_OK || bytes != bytes_ ||
        std::memcmp(part, expected.get(), bytes_) != 0) {
      session_.log("%zu bytes, tag %u: rank %u's block differs from its input", bytes_, k, r);
      return false;
    }
  }
  return true;
}

}  // namespace ferry::bench
