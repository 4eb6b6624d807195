#include "sparse_step_bench.h"

#include <cstring>

#include "input_pattern.h"

namespace ferry::bench {

using tooling::fill_input;
using tooling::hash_hex;
using tooling::op_seed;

SparseStepRounds::SparseStepRounds(const BenchArgs& args, PeerSession& session, std::size_t bytes)
    : args_(args), session_(session), count_(bytes / sizeof(float)) {
  ferry_sparse_spec_init(&spec_);
  spec_.k = ferry_sparse_k_for_density(spec_.chunk, args.sparse_density);
  spec_.bits = args.sparse_bits;
  for (std::uint32_t k = 0; k < args.concurrent; ++k) {
    input_.push_back(allocate(bytes));
    fill_input(ElemType::f32, input_.back().get(), count_, op_seed(k), session.rank());
    residual_.emplace_back(count_);
    sum_.emplace_back(count_);
  }
  parts_.resize(args.concurrent);
}

SparseStepRounds::~SparseStepRounds() = default;

std::vector<std::uint8_t> SparseStepRounds::encode(const void* x, float* residual) const {
  std::size_t capacity = 0, written = 0;
  must(ferry_sparse_max_bytes(&spec_, count_, &capacity), "ferry_sparse_max_bytes");
  std::vector<std::uint8_t> out(capacity);
  must(ferry_sparse_encode(&spec_, FERRY_F32, x, count_, out.data(), capacity, &written, residual),
       "ferry_sparse_encode");
  out.resize(written);
  return out;
}

std::uint64_t SparseStepRounds::run_iteration() {
  const std::size_t ops = input_.size();
  std::vector<std::vector<std::uint8_t>> mine(ops);
  std::vector<ferry_gathered*> results(ops, nullptr);
  std::vector<ferry_op*> issued(ops, nullptr);
  std::string failure;
  for (std::size_t k = 0; k < ops && failure.empty(); ++k) {
    mine[k] = encode(input_[k].get(), residual_[k].data());  // as ferry.diloco keeps its error feedback
    ferry_all_gather_desc desc;
    ferry_all_gather_desc_init(&desc);
    desc.tag = k;
    const ferry_result r =
        ferry_all_gather_async(session_.comm(), mine[k].data(), mine[k].size(), &desc, &results[k], &issued[k]);
    if (r != FERRY_OK) failure = std::string("ferry_all_gather_async: ") + ferry_strerror(r) + ": " + ferry_last_error();
  }
  std::uint64_t sent = 0;
  for (std::size_t k = 0; k < ops && issued[k] != nullptr; ++k) {
    ferry_op_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    const ferry_result waited = ferry_op_wait(issued[k], &info);
    sent += info.bytes_sent;
    if (waited != FERRY_OK && failure.empty())
      failure = std::string("all-gather: ") + ferry_strerror(waited) + ": " + ferry_last_error();
    if (waited != FERRY_OK) continue;
    std::uint32_t members = 0;
    must(ferry_gathered_layout(results[k], &members, nullptr, nullptr), "ferry_gathered_layout");
    std::vector<const void*> data(members);
    std::vector<std::size_t> sizes(members);
    parts_[k].assign(members, {});
    for (std::uint32_t r = 0; r < members; ++r) {
      must(ferry_gathered_part(results[k], r, &data[r], &sizes[r]), "ferry_gathered_part");
      const auto* p = static_cast<const std::uint8_t*>(data[r]);
      parts_[k][r].assign(p, p + sizes[r]);
    }
    must(ferry_sparse_decode_sum(data.data(), sizes.data(), members, sum_[k].data(), count_),
         "ferry_sparse_decode_sum");
  }
  for (ferry_gathered* g : results) ferry_gathered_destroy(g);
  if (!failure.empty()) throw PeerFailure(failure);
  return sent;
}

std::string SparseStepRounds::hash(std::uint32_t k) const { return hash_hex(sum_[k].data(), count_ * sizeof(float)); }

bool SparseStepRounds::correct(std::uint32_t k) const {
  if (static_cast<int>(parts_[k].size()) != session_.world()) return false;
  Buffer input = allocate(count_ * sizeof(float));
  for (int r = 0; r < session_.world(); ++r) {
    fill_input(ElemType::f32, input.get(), count_, op_seed(k), r);
    if (parts_[k][static_cast<std::size_t>(r)] != encode(input.get(), nullptr)) {
      session_.log("%zu bytes, tag %u: rank %d's part is not the encoding of its input", count_ * sizeof(float), k, r);
      return false;
    }
  }
  return true;
}

}  // namespace ferry::bench
