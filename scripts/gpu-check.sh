#!/usr/bin/env bash
# First-hour GPU check (README "Running on a GPU host"): before the first ./run.sh, run the
# GPU-boundary checks against the Slime and Megatron-LM installed on this host and print one
# table. Exit 0 when every row passed, 1 naming the rows that failed, 2 when Slime or
# Megatron-LM cannot be imported.
#
#   scripts/gpu-check.sh              # Slime's parser on serve.yaml (2×4, 8×16) and the loss path
#   scripts/gpu-check.sh --step       # also one optimizer step on a tiny random-weight model
#   scripts/gpu-check.sh --json rows.json
#
# Environment (optional): GUIDANCE_TTT_SLIME_SRC / GUIDANCE_TTT_MEGATRON_SRC name source trees
# to use instead of the installed packages (docs/training.md, "Checking the GPU boundary").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ -x .venv/bin/python ]; then
    python=.venv/bin/python
else
    python=$(bash scripts/find-python.sh)
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$python" -m tttd.gpu_check "$@"
