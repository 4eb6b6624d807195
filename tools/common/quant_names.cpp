#include "quant_names.h"

#include <cstring>

namespace ferry::tooling {

std::vector<std::string> quant_names() {
  // ferry_quant numbers are dense and append-only, so the first one without a
  // name ends the list. It is one past the largest enumerator, a value the
  // enum can hold.
  std::vector<std::string> names;
  for (int raw = 0;; ++raw) {
    const char* name = ferry_quant_name(static_cast<ferry_quant>(raw));
    if (std::strcmp(name, "unknown") == 0) return names;
    names.emplace_back(name);
  }
}

std::optional<ferry_quant> parse_quant(std::string_view name) {
  const std::vector<std::string> names = quant_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<ferry_quant>(i);
  }
  return std::nullopt;
}

}  // namespace ferry::tooling
