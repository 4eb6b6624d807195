// Names of the C API's enums, as the tools and the Python package spell them on
// command lines and in reports. Each comes from the one table in core/, so a
// name never differs between the library's messages and its callers.
#include "capi/api_guard.h"
#include "core/quant.h"

extern "C" {

const char* ferry_quant_name(ferry_quant quant) {
  const int raw = ferry::capi::c_enum_value(quant);
  if (raw < 0 || !ferry::quant_valid(static_cast<uint32_t>(raw))) return "unknown";
  return ferry::quant_name(static_cast<ferry::Quant>(raw)).data();  // views of string literals: NUL-terminated
}

}  // extern "C"
