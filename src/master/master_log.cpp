#include "master/master_log.h"

#include <cstdlib>
#include <string>

#include "core/log.h"

namespace ferry::master {
namespace {

std::shared_ptr<spdlog::logger> make_master_logger() {
  // ferry's sinks and pattern: one stream of lines on stderr, in one format.
  spdlog::logger& ferry_log = ferry::log();
  auto logger = std::make_shared<spdlog::logger>("ferry", ferry_log.sinks().begin(), ferry_log.sinks().end());
  logger->set_level(spdlog::level::info);
  // ferry's log already said so if the variable names no level.
  if (std::getenv("FERRY_LOG_LEVEL")) logger->set_level(ferry_log.level());
  logger->flush_on(spdlog::level::info);
  return logger;
}

}  // namespace

spdlog::logger& master_log() {
  static std::shared_ptr<spdlog::logger> logger = make_master_logger();
  return *logger;
}

bool set_master_log_level(std::string_view name) {
  auto level = spdlog::level::from_str(std::string(name));
  if (level == spdlog::level::off && name != "off") return false;
  master_log().set_level(level);
  return true;
}

}  // namespace ferry::master
