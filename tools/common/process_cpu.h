// CPU time of a process, so that ferry's peers and the Gloo baseline report
// CPU per byte the same way, and ferry-master-load can charge the master.
#pragma once

#include <sys/types.h>

namespace ferry::tooling {

// This process's user + system CPU seconds, all threads.
double process_cpu_s();

// Another running process's CPU seconds: its live threads' time on a CPU in
// ns (/proc/PID/task/*/schedstat), so a phase of a few ms can be charged
// (threads that ended are missed: measure a process whose threads live as
// long as it does); without schedstat, user + system time from
// /proc/PID/stat, in 10 ms clock ticks. Negative when it cannot be read.
double process_cpu_s(pid_t pid);

}  // namespace ferry::tooling
