// ferry's quantizations by name on the tools' command lines (ferry-bench,
// ferry-chaos). The names are libferry's own (ferry_quant_name), so a codec the
// library adds is accepted here without an edit.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/ferry.h"

namespace ferry::tooling {

// Every quantization the linked library names, in enum order: "none", "u8", ...
std::vector<std::string> quant_names();

// The ferry_quant called `name`, or std::nullopt.
std::optional<ferry_quant> parse_quant(std::string_view name);

}  // namespace ferry::tooling
