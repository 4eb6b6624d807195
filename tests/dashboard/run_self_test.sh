#!/usr/bin/env bash
# ctest's entry for the dashboard page's browser self-test (test_dashboard_page.py).
# Exits 77, which ctest reports as skipped, naming what is missing when this host lacks
# Chromium, chromedriver or python3-selenium: a test that cannot run must not pass.
#   usage: tests/dashboard/run_self_test.sh [pytest args...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${FERRY_PYTHON:-/usr/bin/python3}
export PYTHONDONTWRITEBYTECODE=1  # keep the source tree clean
reason=$("$python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import check_dashboard as c
print(c.missing_prerequisites() or "")' "$here")
if [[ -n $reason ]]; then
  echo "run_self_test.sh: SKIPPED: $reason"
  exit 77
fi
exec "$python" -m pytest "$here" -q -p no:cacheprovider "$@"
