#include "net/fd_limit.h"

#include <sys/resource.h>

#include "core/log.h"

namespace ferry::net {
namespace {

FdLimit raise_once() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return {};
  FdLimit result{limit.rlim_cur, limit.rlim_max, limit.rlim_cur};
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit wanted{limit.rlim_max, limit.rlim_max};
    if (::setrlimit(RLIMIT_NOFILE, &wanted) == 0)
      result.soft = limit.rlim_max;
    else
      log().warn("cannot raise the open-file limit from {} to {}", limit.rlim_cur, limit.rlim_max);
  }
  log().debug("open-file limit: {} (hard {}, found {})", result.soft, result.hard, result.before);
  return result;
}

}  // namespace

FdLimit raise_fd_limit() {
  static const FdLimit limit = raise_once();  // thread-safe once, by the language
  return limit;
}

}  // namespace ferry::net
