#!/usr/bin/env bash
# One Guidance-TTT run (docs/running.md): sets this checkout up on first use (scripts/setup.sh
# run: system packages, a Python >= 3.12 .venv, the project with its reef extra, and its tinker
# extra for a settings file that trains on Tinker; well under a second once set up), then
# `guidance-ttt run` with the arguments given here: the run's own settings copy in its state
# directory, the local judge when no judge URL is given, the preflight table, the Reef stack and
# the episode (scripts/run-stack.sh), and a clean stop of everything on exit or Ctrl-C.
# Re-running the same command resumes the run where it stopped.
#
#   ./run.sh                                   serve.yaml: a trained run on this GPU host
#   GUIDANCE_TTT_SERVE_YAML=serve-frozen.yaml GUIDANCE_TTT_GUIDANCE_URL=http://HOST:PORT \
#       GUIDANCE_TTT_GUIDANCE_MODEL=MODEL ./run.sh        frozen guidance (docs/frozen.md)
#   ./run.sh --state-dir work/run2 --steps 5 --set harness.max_rollout_workers=4
#
# Every environment variable scripts/run-stack.sh lists keeps working (GUIDANCE_TTT_SERVE_YAML
# is the default of --config); `guidance-ttt run --help` lists the flags.
# GUIDANCE_TTT_SKIP_SETUP=1 skips the set-up and uses $PYTHON (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if [ -z "${GUIDANCE_TTT_SKIP_SETUP:-}" ]; then
    # A settings file that trains on Tinker (serve-tinker.yaml) needs the Tinker SDK as well:
    # the one --config names, else $GUIDANCE_TTT_SERVE_YAML, else serve.yaml, whose
    # training.backend is harness/settings/tinker.py's TINKER_DEPLOYMENT.
    config=${GUIDANCE_TTT_SERVE_YAML:-serve.yaml}
    previous=
    for argument in "$@"; do
        [ "$previous" = --config ] && config=$argument
        case "$argument" in --config=*) config=${argument#--config=} ;; esac
        previous=$argument
    done
    also=()
    tinker='^\s+backend:\s*tttd\.deployment:TTTDTinkerDeployment\s*$'
    if [ -f "$config" ] && grep -Eq "$tinker" "$config"; then
        also=(tinker)
    fi
    bash scripts/setup.sh run "${also[@]}"
    python=.venv/bin/python
else
    python="${PYTHON:-.venv/bin/python}"
fi
# A stop names ./run.sh (and its arguments) as the command that resumes.
GUIDANCE_TTT_FRONT_COMMAND=./run.sh exec "$python" -m harness.cli.entry run "$@"
