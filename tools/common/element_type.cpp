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

std::string_view reduce_kind_name(ReduceKind op) {
  switch (op) {
    case ReduceKind::sum: return "sum";
    case ReduceKind::avg: return "avg";
    case ReduceKind::prod: return "prod";
    case ReduceKind::min: return "min";
    case ReduceKind::max: return "max";
  }
  return "?";
}

}  // namespace ferry::tooling
