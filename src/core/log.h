// ferry's own named logger. Never spdlog's default logger: a program that
// embeds ferry may use spdlog itself, and must keep its own settings.
// Level: FERRY_LOG_LEVEL (trace, debug, info, warn, error, critical, off);
// default warn for the library, set_log_level() for tools. Output: stderr.
#pragma once

#include <string_view>

#include <spdlog/logger.h>

namespace ferry {

spdlog::logger& log();
// False for an unknown level name.
bool set_log_level(std::string_view level);

}  // namespace ferry
