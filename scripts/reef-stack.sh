# shellcheck shell=bash
# The Reef stack's life cycle for run.sh, sourced (not run): start `reef serve` in the background
# with its log appended to a file, wait until it is healthy within a deadline, stop it.
#
#   start_reef LOG COMMAND...        start COMMAND in the background; sets reef_pid
#   wait_for_reef URL DEADLINE_S LOG poll URL/healthz until it answers 200 (0), the stack exits
#                                    (1), or DEADLINE_S seconds pass (1: the stack is stopped);
#                                    on failure the end of LOG goes to stderr; a 200 counts only
#                                    when the port's listener is reef_pid or a descendant (else
#                                    1, naming the port's holder: the stack is stopped)
#   stop_reef                        SIGTERM the stack and wait for it (safe to call twice)
#   run_episode COMMAND...           run COMMAND in the background and wait for it, so that a
#                                    signal to run.sh is handled at once; returns its status
#   stop_all                         stop the episode, the Reef stack and the key forwarder
#                                    ($proxy_pid), each SIGTERM and wait (safe to call twice),
#                                    and any other background job (one not yet named)
#   trap_signals                     stop_all on exit; INT, TERM and HUP (a closed terminal)
#                                    exit with 128 + the signal after stopping everything
#
# Reads $python (the project's interpreter), GUIDANCE_TTT_QUIET_STOP (set: the stop names no
# process) and REEF_HEALTH_POLL_S (default 5: how often a port that is open but not yet healthy
# is asked after its first 30 s).

reef_pid=""
episode_pid=""
proxy_pid="${proxy_pid:-}"
: "${python:?set python to the interpreter with httpx before sourcing reef-stack.sh}"

start_reef() {
    local log=$1
    shift
    "$@" >>"$log" 2>&1 &
    reef_pid=$!
}

stop_reef() {
    if [ -n "$reef_pid" ] && kill -0 "$reef_pid" 2>/dev/null; then
        [ -n "${GUIDANCE_TTT_QUIET_STOP:-}" ] || echo "${say:-run.sh}: stopping the Reef stack (pid $reef_pid)"
        kill -TERM "$reef_pid" 2>/dev/null || true
        wait "$reef_pid" 2>/dev/null || true
    fi
}

# Whether URL's host:port accepts a TCP connection (bash's /dev/tcp: no process started), so
# that the port is polled often and the health request made only once it is open.
port_open() {
    local hostport=${1#*://}
    hostport=${hostport%%/*}
    (exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}") 2>/dev/null
}

# Whether URL/healthz answers 200, asked over bash's /dev/tcp too (no process started: a Python
# client's start-up held each ask about half a second); the answer must come within 5 s.
reef_healthy() {
    local hostport=${1#*://}
    hostport=${hostport%%/*}
    local status=""
    status=$(
        exec 2>/dev/null 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}" || exit 1
        printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$hostport" >&3
        IFS= read -r -t 5 line <&3 && printf '%s' "$line"
    ) || return 1
    [[ $status =~ ^HTTP/1\.[01]\ 200[[:space:]] ]]
}

wait_for_reef() {
    local url=$1 deadline_s=$2 log=$3
    local started=$SECONDS
    local poll
    until port_open "$url" && reef_healthy "$url"; do
        if ! kill -0 "$reef_pid" 2>/dev/null; then
            wait "$reef_pid" || true
            echo "${say:-run.sh}: reef serve exited before it was healthy; the end of $log:" >&2
            tail -n 100 "$log" >&2
            return 1
        fi
        if ((SECONDS - started >= deadline_s)); then
            echo "${say:-run.sh}: reef serve was not healthy at $url/healthz within ${deadline_s}s" \
                "(startup_deadline_s in serve.yaml, or GUIDANCE_TTT_STARTUP_DEADLINE_S);" \
                "stopping the stack; the end of $log:" >&2
            tail -n 100 "$log" >&2
            stop_reef >&2
            return 1
        fi
        # A closed port is polled every 0.2 s; an open one that is not healthy yet every 0.5 s
        # for its first 30 s, then every REEF_HEALTH_POLL_S (default 5: a training stack).
        poll=0.2
        if port_open "$url"; then
            poll=0.5
            ((SECONDS - started < 30)) || poll="${REEF_HEALTH_POLL_S:-5}"
        fi
        sleep "$poll"
    done
    # A healthy answer counts only from the reef serve started here (another run's Reef on the
    # same port answers too): the port's listener must be reef_pid or a descendant of it.
    if ! "$python" -m harness.adapters.reef.ownership "$url" "$reef_pid"; then
        stop_reef >&2
        return 1
    fi
}

_stop_pid() {
    local pid=$1 what=$2
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        [ -n "${GUIDANCE_TTT_QUIET_STOP:-}" ] || echo "${say:-run.sh}: stopping $what (pid $pid)" >&2
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}

run_episode() {
    "$@" &
    episode_pid=$!
    local status=0
    wait "$episode_pid" || status=$?
    episode_pid=""
    return "$status"
}

stop_all() {
    # A signal that comes between a `&` and the `$!` that names its process runs the trap at
    # that boundary, before the name is set: stop such a job too (first: it is the newest).
    local job
    for job in $(jobs -p); do
        [ "$job" = "$reef_pid" ] || [ "$job" = "$proxy_pid" ] || [ "$job" = "$episode_pid" ] ||
            _stop_pid "$job" "a process it had just started"
    done
    _stop_pid "$episode_pid" "the episode"
    episode_pid=""
    stop_reef
    _stop_pid "$proxy_pid" "the guidance key forwarder"
    proxy_pid=""
}

trap_signals() {
    trap stop_all EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}
