// The master's own account of its run: where it listens, joins, leaves, its
// summary when it stops. At info by default, where ferry's log (core/log.h)
// is at warn, a library's default: a master embedded in a program
// (ferry_master_create, Python's ferry.Master) then says what ferry-master
// says, and the peers of that program stay as quiet as before.
// FERRY_LOG_LEVEL sets it as it sets ferry's log; ferry-master --log-level
// sets both. Same sink and line format as ferry's log.
#pragma once

#include <string_view>

#include <spdlog/logger.h>

namespace ferry::master {

spdlog::logger& master_log();
// False for an unknown level name.
bool set_master_log_level(std::string_view level);

}  // namespace ferry::master
