#!/bin/bash
# catch_discover_tests cuts a test name at ';' (a CMake list separator): such
# a test is registered under a stub that matches nothing and then "passes"
# without running. Fail when any Catch binary has a name ctest would cut.
set -euo pipefail
bad=0
for binary in "$@"; do
  while IFS= read -r name; do
    echo "$(basename "$binary"): '$name' has a ';' (ctest would never run it)"
    bad=1
  done < <("$binary" --list-test-names-only | grep ';' || true)
done
exit $bad
