#!/usr/bin/env bash
# First-hour GPU check (README "Running on a GPU host"): before the first ./run.sh, run the
# GPU-boundary checks against the Slime and Megatron-LM installed on this host and print one
# table. Exit 0 when every row passed, 1 naming the rows that failed, 2 when Slime or
# Megatron-LM cannot be imported.
#
#   scripts/gpu-check.sh              # Slime's parser on serve.yaml (2×4, 8×16), the loss path
#                                     # at TP 1, and at TP 2 on two ranks (loss-tp2)
#   scripts/gpu-check.sh --step       # also one optimizer step on a tiny random-weight model
#   scripts/gpu-check.sh --json rows.json
#
# loss-tp2 starts two processes, one per GPU over NCCL, when two GPUs are visible (it uses
# GPUs 0 and 1); with fewer it prints one SKIP row saying so. With --device cpu it runs the
# same two ranks over gloo. The ranks start with NVLink multicast off (NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1; tttd/gpu_check/launcher.py); they
# are exported here as well, for anything else this check starts.
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
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
exec "$python" -m tttd.gpu_check "$@"
