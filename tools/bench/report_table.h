// The human-readable output: one nccl-tests-style table per implementation,
// then ferry's busbw over the baseline's, size by size.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "aggregate.h"

namespace ferry::bench {

// title: "ferry all-reduce (ring): 3 peers, local (127.0.0.1)".
void print_table(std::FILE* out, const std::string& title, const std::vector<RunSummary>& runs);

// One line of ratios (ferry busbw / baseline busbw per size), and whether
// ferry's first op produced the very bytes the baseline did.
void print_ratios(std::FILE* out, const std::vector<RunSummary>& ferry, const std::vector<RunSummary>& baseline);

}  // namespace ferry::bench
