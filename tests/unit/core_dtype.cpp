// The dtype / op vocabulary: sizes, names, parsing, and the numeric values
// that travel on the wire (append-only, so they are pinned here).
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "core/dtype.h"

using namespace ferry;

TEST_CASE("dtype sizes, float-ness and names", "[core][dtype]") {
  struct Expected {
    DType dtype;
    uint32_t wire_value;
    size_t size;
    bool is_float;
    const char* name;
  };
  const Expected table[] = {
      {DType::u8, 0, 1, false, "u8"},    {DType::i8, 1, 1, false, "i8"},     {DType::u16, 2, 2, false, "u16"},
      {DType::i16, 3, 2, false, "i16"},  {DType::u32, 4, 4, false, "u32"},   {DType::i32, 5, 4, false, "i32"},
      {DType::u64, 6, 8, false, "u64"},  {DType::i64, 7, 8, false, "i64"},   {DType::f16, 8, 2, true, "f16"},
      {DType::bf16, 9, 2, true, "bf16"}, {DType::f32, 10, 4, true, "f32"},   {DType::f64, 11, 8, true, "f64"},
  };
  STATIC_REQUIRE(kDTypeCount == 12);
  for (const Expected& e : table) {
    INFO(e.name);
    CHECK(static_cast<uint32_t>(e.dtype) == e.wire_value);
    CHECK(dtype_valid(e.wire_value));
    CHECK(dtype_size(e.dtype) == e.size);
    CHECK(dtype_is_float(e.dtype) == e.is_float);
    CHECK(dtype_name(e.dtype) == e.name);
    CHECK(parse_dtype(e.name) == e.dtype);
  }
}

TEST_CASE("reduce op names and wire values", "[core][dtype]") {
  const std::pair<ReduceOp, const char*> table[] = {
      {ReduceOp::sum, "sum"}, {ReduceOp::avg, "avg"}, {ReduceOp::prod, "prod"},
      {ReduceOp::min, "min"}, {ReduceOp::max, "max"}};
  STATIC_REQUIRE(kReduceOpCount == 5);
  for (uint32_t i = 0; i < 5; ++i) {
    const auto [op, name] = table[i];
    CHECK(static_cast<uint32_t>(op) == i);
    CHECK(reduce_op_valid(i));
    CHECK(reduce_op_name(op) == name);
    CHECK(parse_reduce_op(name) == op);
  }
}

TEST_CASE("invalid dtypes and ops are rejected", "[core][dtype]") {
  for (const uint32_t raw : {12u, 13u, 255u, 256u, 0xffffffffu}) {
    CHECK_FALSE(dtype_valid(raw));
  }
  for (const uint32_t raw : {5u, 6u, 255u, 0xffffffffu}) {
    CHECK_FALSE(reduce_op_valid(raw));
  }
  CHECK_THROWS_AS(dtype_size(static_cast<DType>(12)), std::invalid_argument);
  CHECK_THROWS_AS(dtype_is_float(static_cast<DType>(200)), std::invalid_argument);
  CHECK_THROWS_AS(dtype_name(static_cast<DType>(255)), std::invalid_argument);
  CHECK_THROWS_AS(reduce_op_name(static_cast<ReduceOp>(5)), std::invalid_argument);
  for (const char* name : {"", "F32", "float", "f32 ", "bf", "i128", "sum"}) {
    CHECK_FALSE(parse_dtype(name).has_value());
  }
  for (const char* name : {"", "Sum", "mean", "product", "f32"}) {
    CHECK_FALSE(parse_reduce_op(name).has_value());
  }
}
