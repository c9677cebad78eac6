#!/usr/bin/env bash
# The stack of one Guidance-TTT run (docs/running.md), started by `guidance-ttt run` (which
# ./run.sh is a thin wrapper over) with the run's own settings copy as GUIDANCE_TTT_SERVE_YAML
# and PYTHON set: the preflight table, then the Reef stack (`reef serve -c <copy>`, log in
# <state>/reef.log; a frozen run's starts beside the preflight and is stopped if the preflight
# fails), then one reef-eval episode (run.py: a Harbor trial with harness:HarborAgent) once Reef
# is healthy and the preflight passed, and a clean stop of the stack on exit, INT, TERM or HUP (guidance-ttt
# run sends TERM; it runs in a session of its own and gets TERM from the kernel if guidance-ttt
# run dies). Re-running the same command resumes the run where it stopped.
#
# Frozen-guidance mode (no GPUs; the guidance model is any OpenAI-compatible endpoint, nothing is
# trained; docs/frozen.md): GUIDANCE_TTT_SERVE_YAML=serve-frozen.yaml with
# GUIDANCE_TTT_GUIDANCE_URL (without /v1) and GUIDANCE_TTT_GUIDANCE_MODEL set.
#
# Environment (all optional; ./run.sh and guidance-ttt run pass them through):
#   GUIDANCE_TTT_SERVE_YAML  the settings file (default serve.yaml; serve-frozen.yaml: frozen;
#                         serve-tinker.yaml: trained on Tinker, TINKER_API_KEY, no GPU)
#   GUIDANCE_TTT_GUIDANCE_API_KEY  frozen mode: the endpoint's key (a loopback forwarder adds it;
#                         it reaches no file); GUIDANCE_TTT_PROXY_PORT its port (default 8011)
#   GUIDANCE_TTT_GUIDANCE_DIALECT  frozen mode: how the guidance body is shaped, sglang (the
#                         default) or openai for an endpoint that refuses unknown fields
#                         (docs/frozen.md, "What each dialect sends")
#   CUDA_VISIBLE_DEVICES  GPUs for Reef's Slime/SGLang (default 0,1; GPU 2 stays free for a
#                         local executor)
#   RAY_ADDRESS           join this Ray cluster instead of starting a local one
#   REEF_INFERENCE_HOST   the address Slime binds its router to (default: this host's first IP)
#   MODEL_ID              the guidance model fetched into work/model (default Qwen/Qwen3-8B)
#   GUIDANCE_TTT_EXECUTOR (a preset, or openai_compatible), GUIDANCE_TTT_EXECUTOR_URL,
#   GUIDANCE_TTT_EXECUTOR_MODEL, GUIDANCE_TTT_EXECUTOR_KEY_ENV (the executor by endpoint,
#   docs/executors.md), GUIDANCE_TTT_REASONING_EFFORT,
#   GUIDANCE_TTT_TRIAL  where the Harbor trial runs: docker (default when a Docker daemon
#                         answers) or local (bubblewrap on this host, the default without one)
#   GUIDANCE_TTT_STARTUP_DEADLINE_S (how long the stack may take to become healthy; 3600),
#   OPENROUTER_API_KEY, FRONTIERCS_JUDGE_URL, FRONTIERCS_PROBLEM_ID, GUIDANCE_TTT_SEED
#                         (see serve.yaml)
#   GUIDANCE_TTT_LOCAL_JUDGE_FILE  set by guidance-ttt run when it starts the local judge
#                         beside this script: the file that gets the judge's URL and the
#                         preflight's "local judge" row (GUIDANCE_TTT_LOCAL_JUDGE) once it
#                         listens; the preflight waits for it
#   GUIDANCE_TTT_QUIET_STOP  set by guidance-ttt run: the stop names no process (guidance-ttt
#                         run prints the one stopping line)
#   GUIDANCE_TTT_COMMAND  set by guidance-ttt run: the command that was typed, which the
#                         preflight's fixes and the lines here name
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:?scripts/run-stack.sh is started by guidance-ttt run, which sets PYTHON}"
export CUDA_VISIBLE_DEVICES="${CUDA_VISIBLE_DEVICES:-0,1}"
model_dir=work/model
model_id="${MODEL_ID:-Qwen/Qwen3-8B}"

serve_yaml="${GUIDANCE_TTT_SERVE_YAML:-serve.yaml}"
export GUIDANCE_TTT_SERVE_YAML="$serve_yaml"

# The run's settings, resolved from the settings file by the same code the harness uses.
settings=$("$python" run.py --serve-yaml "$serve_yaml" --describe)
eval "$settings"
# The trial environment run.py chose (docker, or local without a Docker daemon): kept for the
# episode, so the preflight's trial row and the run agree.
export GUIDANCE_TTT_TRIAL="$TRIAL"

# Every line names the command that was typed (guidance-ttt run sets GUIDANCE_TTT_COMMAND:
# `guidance-ttt run …` or `./run.sh …`); its first words prefix the lines.
command="${GUIDANCE_TTT_COMMAND:-guidance-ttt run}"
case "$command" in
    ./run.sh*) say="run.sh" front="./run.sh" ;;
    *) say="guidance-ttt run" front="guidance-ttt run" ;;
esac

frozen_hint() {
    echo "$say: no GPUs? Frozen-guidance mode runs the same loop without training, with any" \
        "OpenAI-compatible endpoint as the guidance model (docs/frozen.md):" >&2
    echo "    $front --config serve-frozen.yaml --guidance-url http://HOST:PORT" \
        "--guidance-model MODEL" >&2
    echo "$say: or rehearse it first on this machine with scripted stand-in models:" \
        "guidance-ttt rehearse work/rehearsal (README: \"No GPU? Start here\")" >&2
}

# The preflight; beside a local judge that is still starting it waits for the judge's URL and
# row in GUIDANCE_TTT_LOCAL_JUDGE_FILE itself, having read its settings meanwhile.
preflight=("$python" -m harness.preflight --config "$serve_yaml" --state-dir "$STATE_DIR"
    --model-dir "$model_dir" --model-id "$model_id" --judge-url "$JUDGE_URL"
    --problem-id "$JUDGE_PROBLEM_ID" --task-dir "$TASK_DIR" --seed-file "$SEED_FILE"
    --executor "$EXECUTOR" --trial-environment "$TRIAL"
    --usage-file "$PREFLIGHT_USAGE_FILE")
if [ -n "${GUIDANCE_TTT_LOCAL_JUDGE_FILE:-}" ]; then
    preflight+=(--local-judge-file "$GUIDANCE_TTT_LOCAL_JUDGE_FILE")
fi
if [ "$MODE" = frozen ]; then
    preflight+=(--guidance-url "$GUIDANCE_URL")
fi
if [ "$EXECUTOR" = gpt_oss_120b ]; then
    preflight+=(--reasoning-effort "$REASONING_EFFORT")
fi
if [ -n "${GUIDANCE_TTT_EXECUTOR_URL:-}" ]; then
    preflight+=(--executor-url "$GUIDANCE_TTT_EXECUTOR_URL")
fi
if [ -n "${GUIDANCE_TTT_LOCAL_JUDGE:-}" ]; then
    preflight+=(--local-judge "$GUIDANCE_TTT_LOCAL_JUDGE")
fi
# guidance-ttt run starts its local judge beside this script and writes the judge's URL and
# the preflight's row to the file GUIDANCE_TTT_LOCAL_JUDGE_FILE names once it listens (whole:
# it is renamed into place); a judge that does not start stops this script. The episode needs
# the URL (the preflight has read it by then).
wait_for_local_judge() {
    local file=${GUIDANCE_TTT_LOCAL_JUDGE_FILE:-}
    [ -n "$file" ] || return 0
    until [ -s "$file" ]; do
        sleep 0.05
    done
    {
        IFS= read -r FRONTIERCS_JUDGE_URL
        IFS= read -r GUIDANCE_TTT_LOCAL_JUDGE
    } <"$file"
    export FRONTIERCS_JUDGE_URL GUIDANCE_TTT_LOCAL_JUDGE
    JUDGE_URL=$FRONTIERCS_JUDGE_URL
}

mkdir -p "$STATE_DIR"
reef_log="$STATE_DIR/reef.log"
# shellcheck source=scripts/reef-stack.sh
source scripts/reef-stack.sh
# Everything started from here on is stopped on exit, and on INT, TERM or HUP (a closed
# terminal): the preflight, the episode, the Reef stack and the key forwarder
# (scripts/reef-stack.sh).
trap_signals

# What the preflight sees of the variables set below for Reef and the episode: the values the
# run was given (a frozen Reef starts before the preflight).
given_environment=()
for name in REEF_INFERENCE_HOST NO_PROXY no_proxy GUIDANCE_TTT_GUIDANCE_URL; do
    if [ -z "${!name+set}" ]; then
        given_environment=(-u "$name" "${given_environment[@]}")
    else
        given_environment+=("$name=${!name}")
    fi
done

# Slime binds its router to the host address; keep local traffic off any proxy (for Reef and
# the episode; the preflight keeps the values the run was given: given_environment).
export_reef_environment() {
    if [ -z "${REEF_INFERENCE_HOST:-}" ]; then
        REEF_INFERENCE_HOST=$(hostname -I 2>/dev/null | awk '{print $1}')
        REEF_INFERENCE_HOST="${REEF_INFERENCE_HOST:-127.0.0.1}"
    fi
    export REEF_INFERENCE_HOST
    export NO_PROXY="127.0.0.1,localhost,$REEF_INFERENCE_HOST${NO_PROXY:+,$NO_PROXY}"
    export no_proxy="$NO_PROXY"
    if [ -n "${RAY_ADDRESS:-}" ]; then
        echo "$say: joining the Ray cluster at $RAY_ADDRESS (it is left running)"
    fi
}

# Frozen mode with a key: Reef would copy an upstream key into its runtime.yaml, so Reef's
# upstream is a loopback forwarder that adds the key from the environment (docs/frozen.md).
start_key_forwarder() {
    if [ "$MODE" = frozen ] && [ -n "${GUIDANCE_TTT_GUIDANCE_API_KEY:-}" ]; then
        proxy_port="${GUIDANCE_TTT_PROXY_PORT:-8011}"
        "$python" -m harness.adapters.guidance_proxy --upstream "$GUIDANCE_URL" \
            --port "$proxy_port" >>"$STATE_DIR/guidance-proxy.log" 2>&1 &
        proxy_pid=$!
        export GUIDANCE_TTT_GUIDANCE_URL="http://127.0.0.1:$proxy_port"
        echo "$say: guidance key forwarder on $GUIDANCE_TTT_GUIDANCE_URL -> $GUIDANCE_URL"
    fi
}

if [ "$MODE" = frozen ]; then
    # Frozen Reef needs no GPU, model or judge and is up in seconds: it starts beside the
    # judge and the preflight, and a preflight that fails stops it (the trap) before any
    # episode runs.
    export_reef_environment
    start_key_forwarder
    echo "$say: starting reef serve -c $serve_yaml beside the preflight ($MODE guidance;" \
        "log: $reef_log)"
    start_reef "$reef_log" "$python" -m reef serve -c "$serve_yaml"
    env "${given_environment[@]}" "${preflight[@]}" &
    preflight_pid=$!
    preflight_status=0
    wait "$preflight_pid" || preflight_status=$?
    preflight_pid=""
    if [ "$preflight_status" != 0 ]; then
        echo "$say: stopping after the preflight; the Reef stack started beside it is" \
            "stopped, no episode ran." >&2
        echo "$say: fix every row marked missing above, then run again: $command" >&2
        exit 1
    fi
elif [ "$TRAINING_BACKEND" = tinker ]; then
    # Trained on Tinker (serve-tinker.yaml): no GPU and no local weights; Reef's Tinker backend
    # reads the key from the environment variable training.options.api-key-env names.
    if ! "${preflight[@]}"; then
        echo "$say: stopping after the preflight; nothing was started." >&2
        echo "$say: fix every row marked missing above, then run again: $command" >&2
        exit 1
    fi
    export_reef_environment
    echo "$say: starting reef serve -c $serve_yaml ($MODE guidance on Tinker; log: $reef_log)"
    start_reef "$reef_log" "$python" -m reef serve -c "$serve_yaml"
else
    if ! "${preflight[@]}"; then
        echo "$say: stopping after the preflight; nothing was started." >&2
        echo "$say: fix every row marked missing above (a run needs the GPUs listed in" \
            "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES visible to torch), then run again:" \
            "$command" >&2
        if ! "$python" -c 'import sys, torch; sys.exit(torch.cuda.device_count() == 0)' \
            2>/dev/null; then
            frozen_hint
        fi
        exit 1
    fi
    if [ ! -f "$model_dir/config.json" ]; then
        echo "$say: fetching $model_id into $model_dir"
        "$python" -c 'import sys; from huggingface_hub import snapshot_download as get
get(sys.argv[1], local_dir=sys.argv[2])' "$model_id" "$model_dir"
    fi
    export_reef_environment
    echo "$say: starting reef serve -c $serve_yaml ($MODE guidance; log: $reef_log)"
    start_reef "$reef_log" "$python" -m reef serve -c "$serve_yaml"
fi

wait_for_local_judge
echo "$say: waiting for $REEF_URL/healthz, at most ${STARTUP_DEADLINE_S}s (training stack" \
    "start-up can take many minutes)"
if ! wait_for_reef "$REEF_URL" "$STARTUP_DEADLINE_S" "$reef_log"; then
    exit 1
fi

echo "$say: Reef is up; running the episode (STEPS=$STEPS, state in $STATE_DIR)"
run_episode "$python" run.py --serve-yaml "$serve_yaml"
