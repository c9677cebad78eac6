#!/usr/bin/env bash
# Harbor's oracle: install the seed program as the trial's answer.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p /workspace
cp "$here/solution.cpp" /workspace/solution.cpp
