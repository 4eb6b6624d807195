// What a report tool does with a failed call: say so and exit 1, as a table
// with a wrong figure in it is worse than no table.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace ferry::report {

inline void check(const char* tool, const Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "%s: %s\n", tool, status.message.c_str());
  std::exit(1);
}

}  // namespace ferry::report
