#!/usr/bin/env bash
# First-hour GPU check (README "Running on a GPU host"): before the first ./run.sh, check that
# this host has the versions the README pins, then run the GPU-boundary checks against the Slime
# and Megatron-LM installed here and print one table.
#
# Exit 0 when every pin and row passed, 1 naming what failed, 2 when Slime or Megatron-LM
# cannot be imported.
#
#   scripts/gpu-check.sh              # the pins, then Slime's parser on serve.yaml (2×4, 8×16),
#                                     # the loss path at TP 1, and at TP 2 on two ranks (loss-tp2)
#   scripts/gpu-check.sh --step       # also one optimizer step on a tiny random-weight model
#   scripts/gpu-check.sh --json rows.json
#   scripts/gpu-check.sh --device cpu # the same checks on CPU; the pins are skipped (a CPU
#                                     # machine has no GPU image)
#
# The pins (README "Running on a GPU host"; Reef 0.1.3's LoRA path needs all three):
#   Slime           41014d1f29e201137fdffce737bb8bac65bc5219 (Reef 0.1.3's runtime pin)
#   Megatron-LM     1dcf0dafa884ad52ffb243625717a3471643e087 (what Slime's image builds there)
#   Megatron-Bridge 0.4.2, `megatron.bridge.peft.lora.LoRA` importable (Reef's LoRA; Slime no
#                   longer ships it since its PR #2251)
#   SGLang          f7ea06e1e519c569c1d6cb7e1c7b1128cbdbc39f, whose LoRA adapter routes Reef's
#                   weight updates use (checked with Reef's own request-schema checks)
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

on_cpu=0
previous=""
for argument in "$@"; do
    if [ "$argument" = "--device=cpu" ] || { [ "$previous" = "--device" ] && [ "$argument" = "cpu" ]; }; then
        on_cpu=1
    fi
    previous=$argument
done

pins_status=0
if [ "$on_cpu" = 1 ]; then
    echo "SKIP pins: --device cpu (a CPU machine has no GPU image)"
else
    "$python" - <<'PY' || pins_status=1
"""One PASS/FAIL line per pinned version the README names; exit 1 when one differs."""

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

SLIME_COMMIT = "41014d1f29e201137fdffce737bb8bac65bc5219"
MEGATRON_COMMIT = "1dcf0dafa884ad52ffb243625717a3471643e087"
MEGATRON_BRIDGE = "0.4.2"
SGLANG_COMMIT = "f7ea06e1e519c569c1d6cb7e1c7b1128cbdbc39f"


def git_head(start: Path) -> str | None:
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"],
                                  capture_output=True, text=True, check=False)
            return done.stdout.strip() or None
    return None


def installed_commit(distribution: str, package: str) -> str | None:
    """The commit a package was installed from: pip's direct_url.json, else its git checkout."""
    try:
        direct = importlib.metadata.distribution(distribution).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        direct = None
    commit = (json.loads(direct).get("vcs_info") or {}).get("commit_id") if direct else None
    spec = importlib.util.find_spec(package)
    if commit is None and spec is not None and spec.origin:
        commit = git_head(Path(spec.origin).resolve().parent)
    return commit


def slime() -> str | None:
    source = os.environ.get("GUIDANCE_TTT_SLIME_SRC")
    commit = git_head(Path(source)) if source else installed_commit("slime", "slime")
    if commit != SLIME_COMMIT:
        return (f"Slime is at {commit or 'no known commit (not installed?)'}, not {SLIME_COMMIT}: "
                f'pip install --no-deps "slime @ git+https://github.com/THUDM/slime.git@{SLIME_COMMIT}"')
    return None


def megatron_lm() -> str | None:
    source = os.environ.get("GUIDANCE_TTT_MEGATRON_SRC")
    spec = None if source else importlib.util.find_spec("megatron")
    folder = Path(source) if source else Path(next(iter(spec.submodule_search_locations or []), "")) if spec else None
    commit = git_head(folder.resolve()) if folder else None
    if commit != MEGATRON_COMMIT:
        return (f"Megatron-LM is at {commit or 'no known commit (not a source checkout?)'}, not "
                f"{MEGATRON_COMMIT}: check it out there and apply Slime's docker/patch/latest/megatron*.patch")
    return None


def megatron_bridge() -> str | None:
    try:
        version = importlib.metadata.version("megatron-bridge")
        from megatron.bridge.peft.lora import LoRA  # noqa: F401  (what Reef's LoRA path applies)
    except Exception as error:  # not installed, or it does not import against this Megatron-LM
        return (f"Megatron-Bridge's LoRA does not import ({type(error).__name__}: {error}): install "
                f'"megatron-bridge=={MEGATRON_BRIDGE}" with --no-deps, as Reef\'s image does')
    if version != MEGATRON_BRIDGE:
        return f"megatron-bridge is {version}, not {MEGATRON_BRIDGE} (the release that imports against Megatron-LM 1dcf0daf)"
    return None


def sglang() -> str | None:
    try:
        from reef.inference.sglang.lora_schema import (
            require_lora_distributed_request_schema,
            require_lora_tensor_request_schema,
        )

        require_lora_tensor_request_schema()
        require_lora_distributed_request_schema()
    except Exception as error:
        return f"SGLang lacks Reef's LoRA adapter routes ({error}): install SGLang {SGLANG_COMMIT}"
    commit = installed_commit("sglang", "sglang")
    if commit != SGLANG_COMMIT:
        return f"SGLang is at {commit or 'no known commit'}, not {SGLANG_COMMIT}"
    return None


failed = []
CHECKS = (("slime", slime), ("megatron-lm", megatron_lm), ("megatron-bridge", megatron_bridge),
          ("sglang", sglang))
for name, check in CHECKS:
    problem = check()
    print(f"{'FAIL' if problem else 'PASS'} pin {name}{': ' + problem if problem else ''}")
    if problem:
        failed.append(name)
if failed:
    print(f"gpu-check: pins that differ: {', '.join(failed)}", file=sys.stderr)
sys.exit(1 if failed else 0)
PY
fi

checks_status=0
"$python" -m tttd.gpu_check "$@" || checks_status=$?
if [ "$checks_status" -ne 0 ]; then
    exit "$checks_status"
fi
exit "$pins_status"
