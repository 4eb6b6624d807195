// Certificates for `ferry-bench --tls` without --tls-dir: a fresh CA with a
// master and a peer leaf (tools/gen-test-certs of this source tree), in a
// temporary directory that lives as long as this object.
#pragma once

#include <string>

namespace ferry::bench {

class ThrowawayCerts {
 public:
  ThrowawayCerts();  // throws ArgsError when openssl or the script is missing
  ~ThrowawayCerts();
  ThrowawayCerts(const ThrowawayCerts&) = delete;
  ThrowawayCerts& operator=(const ThrowawayCerts&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace ferry::bench
