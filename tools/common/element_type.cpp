#include "element_type.h"

namespace ferry::tooling {

std::string_view elem_type_name(ElemType type) {
  switch (type) {
    case ElemType::f32: return "f32";
    case ElemType::f64: return "f64";
    case ElemType::i32: return "i32";
  }
  return "?";
}

std::size_t elem_type_size(ElemType type) { return type == ElemType::f64 ? 8 : 4; }

std::optional<ElemType> parse_elem_type(std::string_view name) {
  for (ElemType t : {ElemType::f32, ElemType::f64, ElemType::i32})
    if (elem_type_name(t) == name) return t;
  return std::nullopt;
}

std::string_view reduce_kind_name(ReduceKind op) {
  switch (op) {
    case ReduceKind::sum: return "sum";
    case ReduceKind::min: return "min";
    case ReduceKind::max: return "max";
  }
  return "?";
}

std::optional<ReduceKind> parse_reduce_kind(std::string_view name) {
  for (ReduceKind k : {ReduceKind::sum, ReduceKind::min, ReduceKind::max})
    if (reduce_kind_name(k) == name) return k;
  return std::nullopt;
}

}  // namespace ferry::tooling
