#include "throwaway_certs.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "bench_args.h"

namespace ferry::bench {

ThrowawayCerts::ThrowawayCerts() {
  std::string pattern = (std::filesystem::temp_directory_path() / "ferry-bench-certs-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw ArgsError("--tls: cannot make a temporary directory");
  dir_ = pattern;
  const std::string command = "sh '" FERRY_GEN_TEST_CERTS "' '" + dir_ + "' master peer >/dev/null";
  if (std::system(command.c_str()) != 0) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    throw ArgsError("--tls: could not make throwaway certificates with " FERRY_GEN_TEST_CERTS
                    " (is openssl installed?); pass --tls-dir");
  }
}

ThrowawayCerts::~ThrowawayCerts() {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace ferry::bench
