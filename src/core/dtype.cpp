#include "core/dtype.h"

#include <array>
#include <stdexcept>
#include <string>

namespace ferry {
namespace {

struct DTypeInfo {
  std::string_view name;
  size_t size;
  bool is_float;
};

// Indexed by the enum's numeric value, so the order here is the wire order.
constexpr std::array<DTypeInfo, kDTypeCount> kDTypes = {{
    {"u8", 1, false},  {"i8", 1, false},   {"u16", 2, false}, {"i16", 2, false},
    {"u32", 4, false}, {"i32", 4, false},  {"u64", 8, false}, {"i64", 8, false},
    {"f16", 2, true},  {"bf16", 2, true},  {"f32", 4, true},  {"f64", 8, true},
}};

constexpr std::array<std::string_view, kReduceOpCount> kReduceOpNames = {
    "sum", "avg", "prod", "min", "max"};

const DTypeInfo& info(DType t) {
  const auto raw = static_cast<uint32_t>(t);
  if (!dtype_valid(raw)) throw std::invalid_argument("invalid dtype " + std::to_string(raw));
  return kDTypes[raw];
}

}  // namespace

size_t dtype_size(DType t) { return info(t).size; }

bool dtype_is_float(DType t) { return info(t).is_float; }

std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kDTypes.size(); ++i) {
    if (kDTypes[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

bool dtype_valid(uint32_t raw) { return raw < static_cast<uint32_t>(kDTypeCount); }

std::string_view reduce_op_name(ReduceOp op) {
  const auto raw = static_cast<uint32_t>(op);
  if (!reduce_op_valid(raw)) throw std::invalid_argument("invalid reduce op " + std::to_string(raw));
  return kReduceOpNames[raw];
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (size_t i = 0; i < kReduceOpNames.size(); ++i) {
    if (kReduceOpNames[i] == name) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

bool reduce_op_valid(uint32_t raw) { return raw < static_cast<uint32_t>(kReduceOpCount); }

}  // namespace ferry
