// Errors, versions, dtypes: the calls that need no handle.
#include "capi/api_guard.h"
#include "core/dtype.h"

namespace ferry::capi {
namespace {
thread_local std::string last_error;
}  // namespace

void set_last_error(const std::string& message) { last_error = message; }
void clear_last_error() { last_error.clear(); }

}  // namespace ferry::capi

extern "C" {

#define FERRY_STRINGIFY_(x) #x
#define FERRY_STRINGIFY(x) FERRY_STRINGIFY_(x)

const char* ferry_version(void) {
  return FERRY_STRINGIFY(FERRY_VERSION_MAJOR) "." FERRY_STRINGIFY(FERRY_VERSION_MINOR) "." FERRY_STRINGIFY(
      FERRY_VERSION_PATCH);
}

uint32_t ferry_version_number(void) { return FERRY_VERSION_NUMBER; }

const char* ferry_strerror(ferry_result result) {
  int code = ferry::capi::c_enum_value(result);
  if (code < 0 || code > ferry::kErrcMax) return "unknown result code";
  return ferry::errc_name(static_cast<ferry::Errc>(code)).data();  // views of string literals: NUL-terminated
}

const char* ferry_last_error(void) { return ferry::capi::last_error.c_str(); }

int ferry_result_is_retryable(ferry_result result) {
  const int code = ferry::capi::c_enum_value(result);
  return code >= 0 && code <= ferry::kErrcMax && ferry::is_retryable(static_cast<ferry::Errc>(code));
}

size_t ferry_dtype_size(ferry_dtype dtype) {
  if (!ferry::dtype_valid(static_cast<uint32_t>(ferry::capi::c_enum_value(dtype)))) return 0;
  return ferry::dtype_size(static_cast<ferry::DType>(dtype));
}

}  // extern "C"
