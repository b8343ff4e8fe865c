#!/usr/bin/env bash
# The prepared GPU check of issue 35, as a session with a lent GPU runs it from the checkout's
# root:  bash eval/bench/lm_gpu_check.sh [extra lm_gpu_check.py flags]
# Writes lm_gpu_check.json (and .md) to $OUT when set (the device machine's return folder),
# else to the current folder; the run stops itself at 540 s and is killed at 590 s.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dest="${OUT:-.}"
python="${PYTHON:-python3}"
[ -x "$root/.venv/bin/python" ] && python="$root/.venv/bin/python"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" timeout 590 "$python" \
    "$root/eval/bench/lm_gpu_check.py" --out "$dest/lm_gpu_check.json" "$@" \
    | tee "$dest/lm_gpu_check.md"
