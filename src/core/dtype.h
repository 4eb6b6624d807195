// Element types and reduction operators: the vocabulary every layer shares.
// The numeric values are the C API's (ferry_dtype, ferry_op) and travel on the
// wire, so they are append-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry {

enum class DType : uint8_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, u64 = 6, i64 = 7,
  f16 = 8, bf16 = 9, f32 = 10, f64 = 11,
};
inline constexpr int kDTypeCount = 12;

enum class ReduceOp : uint8_t { sum = 0, avg = 1, prod = 2, min = 3, max = 4 };
inline constexpr int kReduceOpCount = 5;

// Size in bytes of one element.
size_t dtype_size(DType t);
bool dtype_is_float(DType t);
std::string_view dtype_name(DType t);            // "f32", "bf16", ...
std::optional<DType> parse_dtype(std::string_view name);
bool dtype_valid(uint32_t raw);

std::string_view reduce_op_name(ReduceOp op);    // "sum", "avg", ...
std::optional<ReduceOp> parse_reduce_op(std::string_view name);
bool reduce_op_valid(uint32_t raw);

}  // namespace ferry
