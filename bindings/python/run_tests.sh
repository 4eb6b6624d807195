#!/usr/bin/env bash
# Runs the Python binding tests against an already built libferry. Builds nothing.
#   usage: bindings/python/run_tests.sh [BUILD_DIR] [pytest args...]
#   BUILD_DIR defaults to $FERRY_BUILD_DIR, else build (relative to the repository root).
#   Test files or node ids among the pytest args run instead of the whole suite (ctest runs
#   one file each: tests/python/CMakeLists.txt).
# Uses Debian's /usr/bin/python3 (python3-pytest, python3-numpy, python3-torch).
# Exits non-zero when a test fails or the prerequisites are missing, and 77 when every test
# it collected was skipped (tests/python/ferry_skip_status.py): ctest reports that as skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:-${FERRY_BUILD_DIR:-build}}
[[ $# -gt 0 ]] && shift
[[ $build = /* ]] || build="$repo/$build"
python=${FERRY_PYTHON:-/usr/bin/python3}

lib="$build/capi/libferry.so"
if [[ ! -f $lib ]]; then
  echo "run_tests.sh: $lib not found; build it first (ninja -C $build ferry)" >&2
  exit 2
fi
if ! "$python" -c 'import pytest, numpy, torch' 2>/dev/null; then
  echo "run_tests.sh: $python lacks pytest, numpy or torch (apt-get install python3-pytest python3-numpy python3-torch)" >&2
  exit 2
fi

export FERRY_LIBRARY=$lib
export PYTHONDONTWRITEBYTECODE=1  # keep the source tree clean
unset FERRY_SECRET_FILE
export PYTHONPATH="$repo/tests/python${PYTHONPATH:+:$PYTHONPATH}"  # the skip-status plugin
suite=("$here/tests")
for arg in "$@"; do
  if [[ $arg == *.py || $arg == *.py::* ]]; then suite=(); fi
done
cd "$repo"
exec "$python" -m pytest "${suite[@]}" -q -rs -p no:cacheprovider -p ferry_skip_status "$@"
