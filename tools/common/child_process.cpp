#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace ferry::tooling {

namespace {

constexpr std::size_t kErrKeepBytes = 64 * 1024;
constexpr auto kPollPeriod = std::chrono::milliseconds(50);

// Process groups of live children, for the signal handler (which may not lock
// or allocate). 0 marks a free slot.
std::array<std::atomic<pid_t>, 1024> g_live_groups{};

void register_group(pid_t pgid) {
  for (auto& slot : g_live_groups) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pgid)) return;
  }
  // Table full: the child still dies with us through PR_SET_PDEATHSIG.
}

void unregister_group(pid_t pgid) {
  for (auto& slot : g_live_groups) {
    pid_t expected = pgid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

// Written by install_child_cleanup_on_signals, so the handler only has to write(2) it.
char g_interrupt_message[128];

extern "C" void kill_children_and_die(int signal_number) {
  for (auto& slot : g_live_groups) {
    const pid_t pgid = slot.load();
    if (pgid > 0) ::kill(-pgid, SIGKILL);
  }
  [[maybe_unused]] const ssize_t ignored =
      ::write(STDERR_FILENO, g_interrupt_message, std::strlen(g_interrupt_message));
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

void install_child_cleanup_on_signals() {
  std::snprintf(g_interrupt_message, sizeof g_interrupt_message, "%s: interrupted; stopped every child process\n",
                program_invocation_short_name);
  struct sigaction action {};
  action.sa_handler = kill_children_and_die;
  sigemptyset(&action.sa_mask);
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal_number, &action, nullptr);
  // A child that dies mid-write must not kill us through its pipe.
  ::signal(SIGPIPE, SIG_IGN);
}

// --- Child -----------------------------------------------------------------------

bool Child::succeeded() const { return wait_status_ && WIFEXITED(*wait_status_) && WEXITSTATUS(*wait_status_) == 0; }

std::optional<int> Child::exit_code() const {
  if (!wait_status_ || !WIFEXITED(*wait_status_)) return std::nullopt;
  return WEXITSTATUS(*wait_status_);
}

std::string Child::describe_exit() const {
  if (!wait_status_) return "running";
  if (WIFEXITED(*wait_status_)) return "exit status " + std::to_string(WEXITSTATUS(*wait_status_));
  if (WIFSIGNALED(*wait_status_)) {
    const int signal_number = WTERMSIG(*wait_status_);
    return "killed by signal " + std::to_string(signal_number) + " (" + ::strsignal(signal_number) + ")";
  }
  return "ended (wait status " + std::to_string(*wait_status_) + ")";
}

std::string Child::err_tail(std::size_t max_lines) const {
  std::string text = err_ + err_partial_line_;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::size_t start = text.size();
  std::size_t lines = 0;
  while (start > 0) {
    const std::size_t newline = text.rfind('\n', start - 1);
    if (newline == std::string::npos) {
      start = 0;
      break;
    }
    if (++lines == max_lines) {
      start = newline + 1;
      break;
    }
    start = newline;
  }
  return text.substr(start);
}

// --- ChildSet --------------------------------------------------------------------

ChildSet::ChildSet(bool echo_stderr) : echo_stderr_(echo_stderr) {}

ChildSet::~ChildSet() {
  try {
    kill_all();
  } catch (...) {
    // Destructors do not throw; PR_SET_PDEATHSIG still takes the children with us.
  }
  for (auto& child : children_) close_pipes(*child);
}

Child& ChildSet::spawn(const std::string& name, const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::logic_error("spawn: empty argv");
  std::vector<char*> c_argv;
  for (const std::string& arg : argv) c_argv.push_back(const_cast<char*>(arg.c_str()));
  c_argv.push_back(nullptr);

  int out_pipe[2], err_pipe[2], exec_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]), ::close(out_pipe[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]), ::close(out_pipe[1]), ::close(err_pipe[0]), ::close(err_pipe[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    // The child: async-signal-safe calls only until exec.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    for (const int signal_number : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(signal_number, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvp(c_argv[0], c_argv.data());
    const int error = errno;
    [[maybe_unused]] const ssize_t ignored = ::write(exec_pipe[1], &error, sizeof error);
    ::_exit(127);
  }
  const int fork_error = errno;
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::close(exec_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]), ::close(err_pipe[0]), ::close(exec_pipe[0]);
    throw std::runtime_error("cannot start " + name + ": fork: " + std::strerror(fork_error));
  }
  ::setpgid(pid, pid);  // also here, so a kill right after spawn reaches the group
  register_group(pid);

  // The exec pipe closes on a successful exec; it carries errno when exec failed.
  int exec_error = 0;
  ssize_t got = 0;
  do {
    got = ::read(exec_pipe[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof exec_error)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    unregister_group(pid);
    ::close(out_pipe[0]), ::close(err_pipe[0]);
    throw std::runtime_error("cannot start " + name + " (" + argv[0] + "): " + std::strerror(exec_error));
  }

  auto child = std::make_unique<Child>();
  child->name_ = name;
  child->pid_ = pid;
  child->out_fd_ = out_pipe[0];
  child->err_fd_ = err_pipe[0];
  set_nonblocking(child->out_fd_);
  set_nonblocking(child->err_fd_);
  children_.push_back(std::move(child));
  return *children_.back();
}

void ChildSet::read_from(Child& child, int& fd, bool is_stderr) {
  char buffer[65536];
  while (fd >= 0) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) {  // end of file, or an error that ends the stream all the same
      close_fd(fd);
      return;
    }
    const std::string_view data(buffer, static_cast<std::size_t>(got));
    if (!is_stderr) {
      child.out_.append(data);
      continue;
    }
    // Whole lines go to err_ (and to our stderr with --verbose); the rest waits.
    child.err_partial_line_.append(data);
    const std::size_t last_newline = child.err_partial_line_.rfind('\n');
    if (last_newline == std::string::npos) continue;
    const std::string lines = child.err_partial_line_.substr(0, last_newline + 1);
    child.err_partial_line_.erase(0, last_newline + 1);
    child.err_ += lines;
    if (child.err_.size() > 2 * kErrKeepBytes) child.err_.erase(0, child.err_.size() - kErrKeepBytes);
    if (echo_stderr_) {
      std::size_t start = 0;
      while (start < lines.size()) {
        const std::size_t end = lines.find('\n', start);
        std::fprintf(stderr, "[%s] %.*s\n", child.name_.c_str(), static_cast<int>(end - start), lines.data() + start);
        start = end + 1;
      }
    }
  }
}

void ChildSet::close_pipes(Child& child) {
  close_fd(child.out_fd_);
  close_fd(child.err_fd_);
}

void ChildSet::reap_ended() {
  bool found = false;
  for (auto& child : children_) {
    if (!child->running()) continue;
    int status = 0;
    rusage usage{};
    const pid_t got = ::wait4(child->pid_, &status, WNOHANG, &usage);
    if (got != child->pid_) continue;
    // What it wrote before it ended is still in the pipes.
    read_from(*child, child->out_fd_, false);
    read_from(*child, child->err_fd_, true);
    close_pipes(*child);
    unregister_group(child->pid_);
    child->wait_status_ = status;
    child->cpu_s_ = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    child->end_order_ = ++ended_;
    if (!found) ++looks_;
    found = true;
    child->end_look_ = looks_;
  }
}

bool ChildSet::pump_until(const std::function<bool()>& done, Clock::time_point deadline) {
  while (true) {
    reap_ended();
    if (done()) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;

    std::vector<pollfd> fds;
    std::vector<std::pair<Child*, bool>> owners;  // (child, is_stderr) per pollfd
    for (auto& child : children_) {
      if (child->out_fd_ >= 0) {
        fds.push_back({child->out_fd_, POLLIN, 0});
        owners.emplace_back(child.get(), false);
      }
      if (child->err_fd_ >= 0) {
        fds.push_back({child->err_fd_, POLLIN, 0});
        owners.emplace_back(child.get(), true);
      }
    }
    const auto wait = std::min<Clock::duration>(kPollPeriod, deadline - now);
    const int wait_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
    const int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready <= 0) continue;  // timeout or EINTR: reap and check again
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Child& child = *owners[i].first;
      const bool is_stderr = owners[i].second;
      read_from(child, is_stderr ? child.err_fd_ : child.out_fd_, is_stderr);
    }
  }
}

void ChildSet::stop(Child& child, std::chrono::milliseconds grace) {
  if (!child.running()) return;
  ::kill(-child.pid_, SIGTERM);
  if (pump_until([&] { return !child.running(); }, Clock::now() + grace)) return;
  ::kill(-child.pid_, SIGKILL);
  pump_until([&] { return !child.running(); }, Clock::now() + std::chrono::seconds(5));
}

void ChildSet::kill_all() {
  for (auto& child : children_) {
    if (child->running()) ::kill(-child->pid_, SIGKILL);
  }
  pump_until(
      [&] {
        return std::none_of(children_.begin(), children_.end(), [](const auto& child) { return child->running(); });
      },
      Clock::now() + std::chrono::seconds(5));
}

}  // namespace ferry::tooling
