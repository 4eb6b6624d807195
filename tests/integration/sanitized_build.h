// What a sanitizer build cannot be asked to do. ASan and TSan reserve
// terabytes of address space at start, so a process under an address-space cap (prlimit
// --as) cannot even start. ASan and UBSan probe memory through a pipe before
// they read it, so in a process whose descriptor table is full UBSan's vptr
// check reports a false "invalid vptr" and ends the process. Tests that need
// either report themselves skipped in such a build (FERRY_TEST_SKIPPED: ctest
// counts them as skipped, not passed) or leave that part out.
#pragma once

#include <catch2/catch.hpp>

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

inline void report_skipped(const char* why) { WARN("FERRY_TEST_SKIPPED: " << why); }

}  // namespace ferry::test
