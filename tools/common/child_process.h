// The child processes of one benchmark run: started in their own process
// groups, their stdout kept whole and their stderr's tail kept, reaped, and
// killed — the group, so whatever they started goes too — on a deadline, on a
// failure, on Ctrl-C, or when this process dies (PR_SET_PDEATHSIG).
//
// Threads: a ChildSet is used from one thread, the one that created it (the
// parent-death signal fires when the *thread* that forked exits). The signal
// cleanup reads a lock-free table that spawn and reap keep up to date.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ferry::tooling {

using Clock = std::chrono::steady_clock;

class Child {
 public:
  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  bool running() const { return !wait_status_.has_value(); }
  bool succeeded() const;
  // Its exit status once it has exited; empty while running or when a signal ended it.
  std::optional<int> exit_code() const;
  // "running", "exit status 1", "killed by signal 9 (Killed)".
  std::string describe_exit() const;
  // Everything it wrote to stdout so far.
  const std::string& out() const { return out_; }
  // Its last `max_lines` lines of stderr (only the last 64 KiB are kept).
  std::string err_tail(std::size_t max_lines) const;
  // User + system CPU seconds, once reaped.
  double cpu_s() const { return cpu_s_; }
  // 1 for the first child of its set to end, 2 for the next, ...; 0 while running.
  int end_order() const { return end_order_; }
  // The set's look for ended children that found this one ended (1, 2, ...); 0 while
  // running. Children found in one look ended in an order nobody saw (the set was
  // not running between their ends): their end_order() is only the set's order.
  int end_look() const { return end_look_; }

 private:
  friend class ChildSet;

  std::string name_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  std::string err_partial_line_;  // for --verbose echo
  std::optional<int> wait_status_;
  double cpu_s_ = 0;
  int end_order_ = 0;
  int end_look_ = 0;
};

class ChildSet {
 public:
  // echo_stderr: copy each child's stderr lines to ours, prefixed "[name] ".
  explicit ChildSet(bool echo_stderr);
  // Kills (SIGKILL, whole group) and reaps every child still running.
  ~ChildSet();
  ChildSet(const ChildSet&) = delete;
  ChildSet& operator=(const ChildSet&) = delete;

  // Starts argv (argv[0] is looked up in PATH when it has no '/'), stdin from
  // /dev/null. Throws std::runtime_error if it cannot be started (exec failed).
  Child& spawn(const std::string& name, const std::vector<std::string>& argv);

  // Moves the children's output and reaps them until done() holds (checked after
  // each round of reading; true is returned) or the deadline passes (false).
  bool pump_until(const std::function<bool()>& done, Clock::time_point deadline);

  // SIGTERM to the child's group; SIGKILL if it has not ended after `grace`.
  void stop(Child& child, std::chrono::milliseconds grace);
  // SIGKILL to every running child's group; reaps them.
  void kill_all();

  const std::vector<std::unique_ptr<Child>>& children() const { return children_; }

 private:
  void reap_ended();
  void read_from(Child& child, int& fd, bool is_stderr);
  void close_pipes(Child& child);

  bool echo_stderr_;
  std::vector<std::unique_ptr<Child>> children_;
  int ended_ = 0;
  int looks_ = 0;  // reap_ended() calls that found a child ended
};

// SIGINT, SIGTERM and SIGHUP: SIGKILL every live child's process group, then
// die of the same signal. Call once, early in main.
void install_child_cleanup_on_signals();

}  // namespace ferry::tooling
