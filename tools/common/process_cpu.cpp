#include "process_cpu.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ferry::tooling {

double process_cpu_s() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

namespace {

// From /proc/PID/stat: in clock ticks (10 ms on most kernels), ended threads included.
double cpu_s_in_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  // Field 3 (state) is the first after ')'; utime and stime are fields 14 and 15.
  for (int index = 3; index <= 15 && fields >> field; ++index) {
    if (index == 14) utime = std::stoull(field);
    if (index == 15) stime = std::stoull(field);
  }
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (ticks <= 0) return -1;
  return static_cast<double>(utime + stime) / static_cast<double>(ticks);
}

// From /proc/PID/task/*/schedstat: nanoseconds on a CPU per live thread; -1 without schedstat.
double cpu_s_in_ns(pid_t pid) {
  std::error_code ec;
  std::filesystem::directory_iterator tasks("/proc/" + std::to_string(pid) + "/task", ec);
  if (ec) return -1;
  unsigned long long ns = 0;
  bool any = false;
  for (const auto& task : tasks) {
    std::ifstream in(task.path() / "schedstat");
    unsigned long long on_cpu = 0;
    if (in >> on_cpu) {
      ns += on_cpu;
      any = true;
    }
  }
  return any ? static_cast<double>(ns) * 1e-9 : -1;
}

}  // namespace

double process_cpu_s(pid_t pid) {
  const double precise = cpu_s_in_ns(pid);
  return precise >= 0 ? precise : cpu_s_in_ticks(pid);
}

}  // namespace ferry::tooling
