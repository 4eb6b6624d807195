// The C API answers questions about results with the library's own C++ rules
// (capi/enum_pairs.cpp pins the numbers at compile time): one retryable rule,
// one set of names.
#include <catch2/catch.hpp>

#include <string>

#include "core/error.h"
#include "ferry/ferry.h"

TEST_CASE("api: ferry_result_is_retryable and ferry_strerror are the C++ rules for every code", "[api]") {
  // 0..15: every ferry_result and a few beyond, all within the C enum's range.
  for (int code = 0; code <= 15; ++code) {
    CAPTURE(code);
    const auto result = static_cast<ferry_result>(code);
    const bool known = code <= ferry::kErrcMax;
    const auto errc = static_cast<ferry::Errc>(code);
    CHECK(ferry_result_is_retryable(result) == (known && ferry::is_retryable(errc) ? 1 : 0));
    CHECK(std::string(ferry_strerror(result)) ==
          (known ? std::string(ferry::errc_name(errc)) : std::string("unknown result code")));
  }
}
