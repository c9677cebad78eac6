#!/usr/bin/env bash
# Harbor verifier entry point: re-score the task's program (tests/task_facts.json) with the judge and
# write /logs/verifier/reward.json plus a reason file (see verify.py for the overrides;
# PYTHON selects the interpreter, python3 by default). When no verdict can be given it exits 1
# and writes no reward file (never a silent reward 0).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_dir="${VERIFIER_LOG_DIR:-/logs/verifier}"
mkdir -p "$log_dir"
if ! "${PYTHON:-python3}" "$here/verify.py"; then
    # No verdict (judge unavailable, judge-side exception, an interpreter that cannot start):
    # fail loudly and leave no reward file, never a silent reward 0.
    rm -f "$log_dir/reward.json"
    if [ ! -s "$log_dir/reason.txt" ]; then
        echo "verifier failed: ${PYTHON:-python3} $here/verify.py could not run" > "$log_dir/reason.txt"
    fi
    echo "test.sh: VERIFIER FAILED, no reward written: $(cat "$log_dir/reason.txt")" >&2
    exit 1
fi
