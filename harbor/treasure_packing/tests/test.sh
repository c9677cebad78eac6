#!/usr/bin/env bash
# Harbor verifier entry point: re-score /workspace/solution.cpp with the FrontierCS judge and
# write /logs/verifier/reward.json plus a reason file (see verify.py for the overrides;
# PYTHON selects the interpreter, python3 by default).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_dir="${VERIFIER_LOG_DIR:-/logs/verifier}"
mkdir -p "$log_dir"
if ! "${PYTHON:-python3}" "$here/verify.py"; then
    # verify.py writes its files itself; this only covers an interpreter that cannot start.
    echo '{"reward": 0.0}' > "$log_dir/reward.json"
    echo "verifier could not run (${PYTHON:-python3} $here/verify.py failed)" > "$log_dir/reason.txt"
fi
