// What a local process can find of another's shared-memory rings: the
// descriptors and mappings /proc shows whose file is a ferry segment (a
// memfd, or a /dev/shm file on builds before rings were sealed). Reading
// map_files needs CAP_SYS_ADMIN; without it only descriptors are found.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace ferry::test {

inline std::vector<std::string> shm_ring_files(pid_t pid) {
  std::vector<std::string> found;
  for (const char* dir : {"fd", "map_files"}) {
    const std::string base = "/proc/" + std::to_string(pid) + "/" + dir;
    DIR* d = ::opendir(base.c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string path = base + "/" + e->d_name;
      char target[256] = {};
      if (::readlink(path.c_str(), target, sizeof target - 1) <= 0) continue;
      if (std::strstr(target, "/memfd:ferry-") || std::strstr(target, "/dev/shm/ferry-")) found.push_back(path);
    }
    ::closedir(d);
  }
  return found;
}

}  // namespace ferry::test
