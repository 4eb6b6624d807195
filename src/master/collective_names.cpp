#include "master/collective_names.h"

#include <vector>

#include "core/dtype.h"
#include "core/quant.h"

namespace ferry::master {

namespace {

std::string dtype_text(uint8_t raw) {
  return dtype_valid(raw) ? std::string(dtype_name(static_cast<DType>(raw))) : "dtype " + std::to_string(raw);
}

std::string op_text(uint8_t raw) {
  return reduce_op_valid(raw) ? std::string(reduce_op_name(static_cast<ReduceOp>(raw))) : "op " + std::to_string(raw);
}

std::string quant_text(uint8_t raw, uint32_t block) {
  if (!quant_valid(raw)) return "quant " + std::to_string(raw);
  const auto kind = static_cast<Quant>(raw);
  std::string text = "quant " + std::string(quant_name(kind));
  if (kind != Quant::none) text += " (block " + std::to_string(block) + ")";
  return text;
}

}  // namespace

std::string collective_kind_name(uint8_t raw) {
  switch (static_cast<wire::CollectiveKind>(raw)) {
    case wire::CollectiveKind::allreduce: return "all_reduce";
    case wire::CollectiveKind::shared_state: return "sync_shared_state";
    case wire::CollectiveKind::barrier: return "barrier";
    case wire::CollectiveKind::broadcast: return "broadcast";
    case wire::CollectiveKind::all_gather: return "all_gather";
  }
  return "collective kind " + std::to_string(raw);
}

std::string describe_collective(const wire::CollectiveBegin& b) {
  if (b.kind == static_cast<uint8_t>(wire::CollectiveKind::broadcast))
    return "broadcast(" + std::to_string(b.count) + " bytes, root " + std::to_string(b.root) + ")";
  if (b.kind == static_cast<uint8_t>(wire::CollectiveKind::all_gather))
    return "all_gather(tag " + std::to_string(b.tag) + ", " + std::to_string(b.count) + " bytes here)";
  if (b.kind != static_cast<uint8_t>(wire::CollectiveKind::allreduce)) return collective_kind_name(b.kind);
  return "all_reduce(count " + std::to_string(b.count) + ", " + dtype_text(b.dtype) + ", " + op_text(b.op) + ", tag " +
         std::to_string(b.tag) + ", " + quant_text(b.quant, b.quant_block) + ")";
}

std::string collective_differences(const wire::CollectiveBegin& a, const wire::CollectiveBegin& b) {
  std::vector<std::string> parts;
  auto differ = [&](bool same, const std::string& what) {
    if (!same) parts.push_back(what);
  };
  differ(a.kind == b.kind, "kind " + collective_kind_name(a.kind) + " vs " + collective_kind_name(b.kind));
  if (a.kind == b.kind && a.kind == static_cast<uint8_t>(wire::CollectiveKind::broadcast)) {
    differ(a.count == b.count, "bytes " + std::to_string(a.count) + " vs " + std::to_string(b.count));
    differ(a.root == b.root, "root " + std::to_string(a.root) + " vs " + std::to_string(b.root));
  }
  if (a.kind == b.kind && a.kind == static_cast<uint8_t>(wire::CollectiveKind::all_gather))
    differ(a.tag == b.tag, "tag " + std::to_string(a.tag) + " vs " + std::to_string(b.tag));
  if (a.kind == b.kind && a.kind == static_cast<uint8_t>(wire::CollectiveKind::allreduce)) {
    differ(a.count == b.count, "count " + std::to_string(a.count) + " vs " + std::to_string(b.count));
    differ(a.dtype == b.dtype, "dtype " + dtype_text(a.dtype) + " vs " + dtype_text(b.dtype));
    differ(a.op == b.op, "op " + op_text(a.op) + " vs " + op_text(b.op));
    differ(a.tag == b.tag, "tag " + std::to_string(a.tag) + " vs " + std::to_string(b.tag));
    differ(a.quant == b.quant && a.quant_block == b.quant_block,
           quant_text(a.quant, a.quant_block) + " vs " + quant_text(b.quant, b.quant_block));
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace ferry::master
