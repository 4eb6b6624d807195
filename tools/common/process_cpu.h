// CPU time of the calling process, so that ferry's peers and the Gloo baseline
// report CPU per byte the same way.
#pragma once

namespace ferry::tooling {

// This process's user + system CPU seconds, all threads.
double process_cpu_s();

}  // namespace ferry::tooling
