#!/usr/bin/env bash
# Harbor's oracle: install the seed program as the trial's answer
# (SOLUTION_DEST overrides the destination, for tests outside a container).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${SOLUTION_DEST:-/workspace/solution.py}"
mkdir -p "$(dirname "$dest")"
cp "$here/solution.py" "$dest"
