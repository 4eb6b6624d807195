// The element types and reductions the tools (ferry-bench, ferry-gloo-bench,
// ferry-chaos) measure: element types both ferry and Gloo run, and every
// reduction of ferry's (the Gloo baseline runs sum), each with an exact result
// on the inputs of input_pattern.h.
#pragma once

#include <cstddef>
#include <string_view>

namespace ferry::tooling {

enum class ElemType { f32, f64, i32 };
enum class ReduceKind { sum, avg, prod, min, max };

// Every value: the choices of a command-line option.
inline constexpr ElemType kElemTypes[] = {ElemType::f32, ElemType::f64, ElemType::i32};
inline constexpr ReduceKind kReduceKinds[] = {ReduceKind::sum, ReduceKind::avg, ReduceKind::prod, ReduceKind::min,
                                              ReduceKind::max};

std::string_view elem_type_name(ElemType type);
std::size_t elem_type_size(ElemType type);
std::string_view reduce_kind_name(ReduceKind op);

}  // namespace ferry::tooling
