// The element types and reductions the tools (ferry-bench, ferry-gloo-bench,
// ferry-chaos) measure: the ones both ferry and Gloo can run, with exact results.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ferry::tooling {

enum class ElemType { f32, f64, i32 };
enum class ReduceKind { sum, min, max };

std::string_view elem_type_name(ElemType type);
std::size_t elem_type_size(ElemType type);
std::optional<ElemType> parse_elem_type(std::string_view name);
std::string_view reduce_kind_name(ReduceKind op);
std::optional<ReduceKind> parse_reduce_kind(std::string_view name);

}  // namespace ferry::tooling
