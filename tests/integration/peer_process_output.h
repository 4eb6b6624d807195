// What ferry-test-peer (peer_process_main.cpp) reports, parsed: its "op"
// and "next" lines, for the tests that run peers as real processes.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "child_process.h"  // tools/common
#include "ferry/ferry.h"

namespace ferry::test {

// One "op ...", "next ...", "rejoined ..." or "sync ..." line of ferry-test-peer.
struct OpLine {
  std::string kind;  // "op", "next", "rejoined" or "sync"
  int round = -1;
  int result = -1;
  unsigned world = 0;
  double value = 0;
  int uniform = 0;
  double t = 0;
  uint64_t revision = 0, received = 0;  // sync lines
  int exact = 0;
};

inline std::vector<OpLine> op_lines(const std::string& out) {
  std::vector<OpLine> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    OpLine op;
    words >> op.kind;
    if (op.kind != "op" && op.kind != "next" && op.kind != "rejoined" && op.kind != "sync") continue;
    for (std::string word; words >> word;) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      if (key == "round") op.round = std::stoi(value);
      else if (key == "result") op.result = std::stoi(value);
      else if (key == "world") op.world = static_cast<unsigned>(std::stoul(value));
      else if (key == "value") op.value = std::stod(value);
      else if (key == "uniform") op.uniform = std::stoi(value);
      else if (key == "t") op.t = std::stod(value);
      else if (key == "revision") op.revision = std::stoull(value);
      else if (key == "received") op.received = std::stoull(value);
      else if (key == "exact") op.exact = std::stoi(value);
    }
    lines.push_back(op);
  }
  return lines;
}

inline size_t ok_ops(const tooling::Child& child) {
  size_t n = 0;
  for (const OpLine& op : op_lines(child.out())) n += op.kind == "op" && op.result == FERRY_OK;
  return n;
}

// Each process's exit, stdout and the tail of its stderr, for a failed check's message.
inline std::string describe(const std::vector<tooling::Child*>& peers) {
  std::string out;
  for (const tooling::Child* p : peers)
    out += "--- " + p->name() + " (" + p->describe_exit() + ")\nstdout:\n" + p->out() + "stderr:\n" + p->err_tail(20);
  return out;
}

}  // namespace ferry::test
