#include "binaries.h"

#include <filesystem>
#include <stdexcept>
#include <vector>

#include <unistd.h>

namespace ferry::bench {

namespace fs = std::filesystem;

namespace {

bool is_executable(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

std::string find_one(const std::string& name, const std::vector<fs::path>& dirs, const std::string& target) {
  std::string tried;
  for (const fs::path& dir : dirs) {
    const fs::path candidate = (dir / name).lexically_normal();
    if (is_executable(candidate)) return candidate.string();
    tried += "\n  " + candidate.string();
  }
  throw std::runtime_error("cannot find " + name + "; tried:" + tried + "\nbuild it (ninja -C BUILD " + target +
                           ") or pass --bin-dir DIR");
}

}  // namespace

Binaries find_binaries(const std::string& bin_dir, bool need_master, bool need_gloo) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot read /proc/self/exe: " + ec.message());
  const fs::path here = self.parent_path();

  Binaries found;
  found.self = self.string();
  auto dirs_for = [&](const char* build_subdir) {
    if (!bin_dir.empty()) return std::vector<fs::path>{fs::path(bin_dir)};
    return std::vector<fs::path>{here, here / ".." / build_subdir};
  };
  if (need_master) found.master = find_one("ferry-master", dirs_for("master"), "ferry-master");
  if (need_gloo) found.gloo = find_one("ferry-gloo-bench", dirs_for("gloo_baseline"), "ferry-gloo-bench");
  return found;
}

}  // namespace ferry::bench
