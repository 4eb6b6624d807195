// The C boundary: every extern "C" body runs inside guarded(), which catches
// everything, maps it to a ferry_result and keeps the message for
// ferry_last_error() on this thread. No exception ever crosses into C.
#pragma once

#include <algorithm>
#include <cstring>
#include <exception>
#include <system_error>
#include <new>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "ferry/ferry.h"

namespace ferry::capi {

void set_last_error(const std::string& message);
void clear_last_error();

inline ferry_result fail(Errc code, const std::string& message) {
  set_last_error(message);
  return static_cast<ferry_result>(code);
}

template <class F>
ferry_result guarded(F&& body) noexcept {
  try {
    clear_last_error();
    body();
    return FERRY_OK;
  } catch (const Error& e) {
    return fail(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return fail(Errc::system, "out of memory");
  } catch (const std::system_error& e) {
    return fail(Errc::system, e.what());
  } catch (const std::exception& e) {
    return fail(Errc::internal, std::string("unexpected: ") + e.what());
  } catch (...) {
    return fail(Errc::internal, "unexpected non-standard exception");
  }
}

// Throws Errc::invalid_argument naming the parameter when `pointer` is null.
inline void require(const void* pointer, const char* name) {
  if (!pointer) throw Error(Errc::invalid_argument, std::string(name) + " is NULL");
}

// Copies a caller's versioned struct over defaults: fields the caller's
// (older, smaller) struct lacks keep their defaults.
template <class T>
T read_versioned(const T* given, void (*init)(T*), const char* name) {
  require(given, name);
  const uint32_t size = given->struct_size;
  if (size < 2 * sizeof(uint32_t) || size > (1u << 16))
    throw Error(Errc::invalid_argument, std::string(name) + "->struct_size is " + std::to_string(size) +
                                            ": initialise it with its _init function");
  T out;
  init(&out);
  size_t n = std::min<size_t>(size, sizeof(T));
  std::memcpy(static_cast<void*>(&out), given, n);
  out.struct_size = sizeof(T);
  return out;
}

// Writes `full` back into a caller's versioned struct that is `size` bytes
// long (its struct_size): only the fields an older, smaller struct has, and
// struct_size left as the caller set it.
template <class T>
void write_versioned(void* given, uint32_t size, T full) {
  full.struct_size = size;
  std::memcpy(given, &full, std::min<size_t>(size, sizeof(T)));
}

// The *_init_sized calls: `defaults` fills a whole T; the caller's struct is `size`
// bytes. A smaller (older) struct gets only its own bytes and keeps its size; a bigger
// (newer) one gets its unknown tail zeroed and struct_size = this library's sizeof,
// which is all it reads of it (and how a binding learns the library's layout).
template <class T>
void init_versioned(T* given, uint32_t size, void (*defaults)(T*)) {
  if (!given || size < sizeof(uint32_t)) return;
  T full;
  defaults(&full);
  if (size > sizeof(T)) std::memset(reinterpret_cast<char*>(given) + sizeof(T), 0, size - sizeof(T));
  write_versioned(given, std::min<uint32_t>(size, sizeof(T)), full);
}

// Each struct's size in 0.4.0, the last header whose ferry_X_init passed no size: what
// a program built against it allocated, so all that the plain ferry_X_init symbols may
// write. Frozen: a struct that grows keeps its number here.
template <class T>
inline constexpr uint32_t kSizeIn040 = 0;
template <> inline constexpr uint32_t kSizeIn040<ferry_master_params> = 72;
template <> inline constexpr uint32_t kSizeIn040<ferry_comm_params> = 128;
template <> inline constexpr uint32_t kSizeIn040<ferry_allreduce_desc> = 48;
template <> inline constexpr uint32_t kSizeIn040<ferry_all_gather_desc> = 16;
template <> inline constexpr uint32_t kSizeIn040<ferry_sparse_spec> = 16;
template <> inline constexpr uint32_t kSizeIn040<ferry_allreduce_job> = 80;
template <> inline constexpr uint32_t kSizeIn040<ferry_tensor> = 56;
template <> inline constexpr uint32_t kSizeIn040<ferry_shared_state> = 48;

// A C enum as the caller passed it. C may pass any int in an enum; in C++ a
// load of a value outside the enum's range is undefined (UBSan flags it), so
// the bytes are copied out instead of the enum being read.
template <class E>
int c_enum_value(const E& value) {
  static_assert(sizeof(E) == sizeof(int), "ferry's C enums are int-sized");
  int out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

// `field` names the caller's field in the message, e.g. "state->tensors[2].dtype".
// By reference and read as an int: loading an out-of-range enum by value is undefined.
inline DType checked_dtype(const ferry_dtype& dtype, const std::string& field) {
  int value = c_enum_value(dtype);
  if (!dtype_valid(static_cast<uint32_t>(value)))
    throw Error(Errc::invalid_argument, field + " " + std::to_string(value) + " is not a ferry_dtype");
  return static_cast<DType>(value);
}

}  // namespace ferry::capi
