#include "core/log.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace ferry {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("ferry", sink);
  logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [ferry %^%l%$] %v");
  logger->set_level(spdlog::level::warn);
  if (const char* env = std::getenv("FERRY_LOG_LEVEL")) {
    auto level = spdlog::level::from_str(env);
    if (level != spdlog::level::off || std::string_view(env) == "off") {
      logger->set_level(level);
    } else {
      logger->warn("FERRY_LOG_LEVEL={} is not a level (trace, debug, info, warn, error, critical, off); "
                   "logging at warn", env);
    }
  }
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = make_logger();
  return *logger;
}

bool set_log_level(std::string_view name) {
  auto level = spdlog::level::from_str(std::string(name));
  if (level == spdlog::level::off && name != "off") return false;
  log().set_level(level);
  return true;
}

}  // namespace ferry
