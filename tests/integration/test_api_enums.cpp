// The C API's answers about results, pinned value by value: ferry.h promises
// which codes are retryable (timeouts and lost peers, nothing else) and the
// names are what users grep their logs for. capi/enum_pairs.cpp pins the
// numbers at compile time; this pins what the C functions say about each.
#include <catch2/catch.hpp>

#include <string>

#include "ferry/ferry.h"

namespace {

struct ResultRow {
  int code;
  int retryable;
  const char* name;
};

// 0..12: every ferry_result; 13..15: values past the enum's last, still within its range.
constexpr ResultRow kResults[] = {
    {0, 0, "ok"},
    {1, 0, "invalid argument"},
    {2, 0, "invalid usage"},
    {3, 1, "timeout"},
    {4, 1, "peer lost"},
    {5, 0, "master lost"},
    {6, 0, "cannot connect"},
    {7, 0, "collective mismatch"},
    {8, 0, "kicked by the master"},
    {9, 0, "protocol violation"},
    {10, 0, "authentication failed"},
    {11, 0, "system error"},
    {12, 0, "internal error"},
    {13, 0, "unknown result code"},
    {14, 0, "unknown result code"},
    {15, 0, "unknown result code"},
};

}  // namespace

TEST_CASE("api: ferry_result_is_retryable and ferry_strerror give the pinned answer for every code", "[api]") {
  static_assert(FERRY_ERR_INTERNAL == 12, "a new ferry_result needs its row in kResults");
  for (const ResultRow& row : kResults) {
    CAPTURE(row.code);
    const auto result = static_cast<ferry_result>(row.code);
    CHECK(ferry_result_is_retryable(result) == row.retryable);
    CHECK(std::string(ferry_strerror(result)) == row.name);
  }
}
