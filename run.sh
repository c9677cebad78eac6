#!/usr/bin/env bash
# One Guidance-TTT run on a GPU host (docs/running.md): the preflight table, then the Reef stack
# (`reef serve -c serve.yaml`, log in <state>/reef.log), then one reef-eval episode (run.py: a
# Harbor trial with harness:HarborAgent), and a clean stop of the stack on exit.
# Re-running the same command resumes the run where it stopped.
#
# Environment (all optional):
#   CUDA_VISIBLE_DEVICES  GPUs for Reef's Slime/SGLang (default 0,1; GPU 2 stays free for a
#                         local executor)
#   RAY_ADDRESS           join this Ray cluster instead of starting a local one
#   REEF_INFERENCE_HOST   the address Slime binds its router to (default: this host's first IP)
#   MODEL_ID              the guidance model fetched into work/model (default Qwen/Qwen3-8B)
#   GUIDANCE_TTT_EXECUTOR, GUIDANCE_TTT_REASONING_EFFORT, GUIDANCE_TTT_EXECUTOR_URL,
#   GUIDANCE_TTT_STARTUP_DEADLINE_S (how long the stack may take to become healthy; 3600),
#   OPENROUTER_API_KEY, FRONTIERCS_JUDGE_URL, FRONTIERCS_PROBLEM_ID, GUIDANCE_TTT_SEED
#                         (see serve.yaml)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

if [ -x .venv/bin/python ]; then
    python=.venv/bin/python
else
    python=$(bash scripts/find-python.sh)
fi
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0,1}"
model_dir=work/model
model_id="${MODEL_ID:-Qwen/Qwen3-8B}"

# The run's settings, resolved from serve.yaml by the same code the harness uses.
settings=$("$python" run.py --describe)
eval "$settings"

preflight=("$python" -m harness.preflight --state-dir "$STATE_DIR" --model-dir "$model_dir"
    --model-id "$model_id" --judge-url "$JUDGE_URL" --problem-id "$JUDGE_PROBLEM_ID"
    --task-dir "$TASK_DIR" --seed-file "$SEED_FILE" --executor "$EXECUTOR")
if [ "$EXECUTOR" = gpt_oss_120b ]; then
    preflight+=(--reasoning-effort "$REASONING_EFFORT")
fi
if [ -n "${GUIDANCE_TTT_EXECUTOR_URL:-}" ]; then
    preflight+=(--executor-url "$GUIDANCE_TTT_EXECUTOR_URL")
fi
if ! "${preflight[@]}"; then
    echo "run.sh: stopping after the preflight; nothing was started." >&2
    echo "run.sh: fix every row marked missing above (a run needs the GPUs listed in" \
        "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES visible to torch), then re-run ./run.sh" >&2
    exit 1
fi

if [ ! -f "$model_dir/config.json" ]; then
    echo "run.sh: fetching $model_id into $model_dir"
    "$python" -c 'import sys; from huggingface_hub import snapshot_download as get
get(sys.argv[1], local_dir=sys.argv[2])' "$model_id" "$model_dir"
fi

# Slime binds its router to the host address; keep local traffic off any proxy.
if [ -z "${REEF_INFERENCE_HOST:-}" ]; then
    REEF_INFERENCE_HOST=$(hostname -I 2>/dev/null | awk '{print $1}')
    REEF_INFERENCE_HOST="${REEF_INFERENCE_HOST:-127.0.0.1}"
fi
export REEF_INFERENCE_HOST
export NO_PROXY="127.0.0.1,localhost,$REEF_INFERENCE_HOST${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"
if [ -n "${RAY_ADDRESS:-}" ]; then
    echo "run.sh: joining the Ray cluster at $RAY_ADDRESS (it is left running)"
fi

mkdir -p "$STATE_DIR"
reef_log="$STATE_DIR/reef.log"
# shellcheck source=scripts/reef-stack.sh
source scripts/reef-stack.sh
trap stop_reef EXIT
trap 'exit 130' INT TERM

echo "run.sh: starting reef serve -c serve.yaml (log: $reef_log)"
start_reef "$reef_log" "$python" -m reef serve -c serve.yaml

echo "run.sh: waiting for $REEF_URL/healthz, at most ${STARTUP_DEADLINE_S}s (training stack" \
    "start-up can take many minutes)"
if ! wait_for_reef "$REEF_URL" "$STARTUP_DEADLINE_S" "$reef_log"; then
    exit 1
fi

echo "run.sh: Reef is up; running the episode (STEPS=$STEPS, state in $STATE_DIR)"
"$python" run.py
