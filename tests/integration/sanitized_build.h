// What a sanitizer build cannot be asked to do. ASan and TSan reserve
// terabytes of address space at start, so a process under an address-space cap (prlimit
// --as) cannot even start. ASan and UBSan probe memory through a pipe before
// they read it, so in a process whose descriptor table is full UBSan's vptr
// check reports a false "invalid vptr" and ends the process. Tests that need
// either report themselves skipped in such a build (FERRY_TEST_SKIPPED: ctest
// counts them as skipped, not passed) or leave that part out.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <initializer_list>
#include <vector>

namespace ferry::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kReservesAddressSpace = true;  // ASan and TSan shadow memory
#else
inline constexpr bool kReservesAddressSpace = false;
#endif

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kProbesMemoryThroughPipes = true;  // ASan, and UBSan beside it in our CI build
#else
inline constexpr bool kProbesMemoryThroughPipes = false;
#endif

// Sanitized builds run several times slower. Tests that sweep world sizes or
// element counts run a subset there (the sizes where the code paths differ);
// the Release build runs every one.
inline constexpr bool kSanitized = kReservesAddressSpace;

// The world sizes of such a sweep: all of `sizes` in Release, and in a
// sanitized build those among 2, 5 and 8 (a ring of two, one of uneven
// segments, the largest). Listed for GENERATE(from_range(...)), so that no
// size left out runs as an empty case that reads as passed.
inline std::vector<size_t> swept_world_sizes(std::initializer_list<size_t> sizes) {
  std::vector<size_t> out;
  for (size_t n : sizes)
    if (!kSanitized || n == 2 || n == 5 || n == 8) out.push_back(n);
  return out;
}

inline void report_skipped(const char* why) { WARN("FERRY_TEST_SKIPPED: " << why); }

}  // namespace ferry::test
