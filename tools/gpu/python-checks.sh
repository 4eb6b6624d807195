#!/usr/bin/env bash
# Issue 41's Python checks, in one run on a machine with a GPU (about 5 minutes at most):
#   1. bindings/python/tests/test_cuda.py (the CUDA staging: mixed run, stream not blocked, ...);
#   2. tools/gpu/train-overlap.py small (10 M parameters), then at 1 B parameters.
# Needs FERRY_LIBRARY (libferry.so) and, where ferry's Debian libraries are not installed,
# LD_LIBRARY_PATH naming the folder they were carried in; python3 with torch (CUDA) and pytest.
# Results go to $OUT (else /tmp/ferry-gpu-checks): test_cuda.txt, overlap-small.json, overlap-1b.json.
#   usage: tools/gpu/python-checks.sh [--quick]    (--quick: skip the 1 B run)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${OUT:-/tmp/ferry-gpu-checks}
python=${FERRY_PYTHON:-python3}
mkdir -p "$out"
cd "$repo"
export PYTHONDONTWRITEBYTECODE=1

: "${FERRY_LIBRARY:?set FERRY_LIBRARY to libferry.so}"
nvidia-smi -L 2>&1 | head -4
"$python" -c 'import torch, numpy, sys; print("python", sys.version.split()[0], "torch", torch.__version__,
"numpy", numpy.__version__, "cuda", torch.cuda.is_available())'
status=0
if "$python" -c 'import pytest' 2>/dev/null; then
  timeout 240 "$python" -m pytest bindings/python/tests/test_cuda.py -q -p no:cacheprovider -rs 2>&1 \
    | tee "$out/test_cuda.txt" | tail -25
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=1
else
  echo "python-checks: $python has no pytest; test_cuda.py not run" | tee "$out/test_cuda.txt"
  status=1
fi
timeout 90 "$python" tools/gpu/train-overlap.py --size 10000000 --steps 40 --sync-every 20 --repeats 2 \
  --timeout 80 > "$out/overlap-small.json" || status=1
cat "$out/overlap-small.json"
if [[ ${1:-} != --quick ]]; then
  timeout 190 "$python" tools/gpu/train-overlap.py --timeout 180 > "$out/overlap-1b.json" || status=1
  cat "$out/overlap-1b.json"
fi
exit $status
