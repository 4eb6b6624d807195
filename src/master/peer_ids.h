// Small helpers over peer ids, shared by the master's state machine files.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::master {

inline std::string peer_name(uint64_t id) { return "peer " + std::to_string(id); }

inline bool contains(const std::vector<uint64_t>& v, uint64_t id) { return std::find(v.begin(), v.end(), id) != v.end(); }

inline void erase_value(std::vector<uint64_t>& v, uint64_t id) { v.erase(std::remove(v.begin(), v.end(), id), v.end()); }

}  // namespace ferry::master
