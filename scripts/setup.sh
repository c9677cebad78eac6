#!/usr/bin/env bash
# Set this checkout up for one of its two commands, idempotently (./run.sh and ./test.sh call it):
#
#   scripts/setup.sh run     system packages for a run, a Python >= 3.12 virtualenv in .venv,
#                            the judge (./judges, its own distribution) and the project with
#                            the extras a run and its look afterwards need (reef: reef serve,
#                            reef-eval, Harbor; plot: guidance-ttt plot)
#   scripts/setup.sh test    the same with the test tools' system packages (shellcheck,
#                            chromium) and every extra the suite needs
#   scripts/setup.sh run tinker   a run's set-up and the named extras of pyproject.toml as well
#                            (./run.sh adds tinker for a settings file that trains on Tinker)
#
# Python: .venv's own when it exists, else scripts/find-python.sh ($PYTHON, python3.1x, python3,
# pyenv) or one line naming the need. What is installed is recorded in .venv/.guidance-ttt-setup
# (one hash of pyproject.toml and judges/pyproject.toml, and the extras); when that already
# covers the command, nothing is installed and the check takes well under a second.
# GUIDANCE_TTT_SETUP_DRY_RUN=1 only says what it would do (the tests check its decisions that
# way, without network).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

purpose=${1:?usage: scripts/setup.sh run|test}
case "$purpose" in
run) extras=(reef plot) ;;
test) extras=(reef torch plot test watch cluster tinker) ;;
*)
    echo "error: scripts/setup.sh $purpose: use run or test" >&2
    exit 2
    ;;
esac
shift
for extra in "$@"; do
    if ! [[ $extra =~ ^[a-z][a-z0-9_-]*$ ]] || ! grep -q "^$extra = \[" pyproject.toml; then
        echo "error: scripts/setup.sh: '$extra' is not an extra of pyproject.toml" \
            "(its [project.optional-dependencies])" >&2
        exit 2
    fi
    # shellcheck disable=SC2076  # a literal word match
    [[ " ${extras[*]} " == *" $extra "* ]] || extras+=("$extra")
done
dry=${GUIDANCE_TTT_SETUP_DRY_RUN:-}
stamp=.venv/.guidance-ttt-setup

bash scripts/system-packages.sh "$purpose"

if [ -x .venv/bin/python ]; then
    python=.venv/bin/python
    if ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
        echo "error: .venv was made with $("$python" --version 2>&1); this project needs Python" \
            ">= 3.12: remove .venv (rm -rf .venv) and run ./${purpose}.sh again" >&2
        exit 1
    fi
else
    base=$(SETUP_COMMAND="$purpose.sh" bash scripts/find-python.sh)
    if [ -n "$dry" ]; then
        echo "setup: would create .venv with $base ($("$base" --version 2>&1))"
    else
        echo "setup: creating .venv with $base ($("$base" --version 2>&1))"
        "$base" -m venv .venv
    fi
    python=.venv/bin/python
fi

hash=$(cat pyproject.toml judges/pyproject.toml | sha256sum | cut -d' ' -f1)
installed=()
if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$hash" ]; then
    read -r -a installed <<<"$(sed -n 2p "$stamp")"
fi
needed=()
for extra in "${extras[@]}"; do
    # shellcheck disable=SC2076  # a literal word match
    [[ " ${installed[*]} " == *" $extra "* ]] || needed+=("$extra")
done
if [ ${#needed[@]} -eq 0 ]; then
    [ -n "$dry" ] && echo "setup: .venv is up to date for ./$purpose.sh (extras: ${extras[*]})"
    exit 0
fi

# The union of what was installed and what this command needs, so ./run.sh after ./test.sh
# (or the other way round) installs nothing twice.
all=("${installed[@]}" "${needed[@]}")
spec=".[$(
    IFS=,
    echo "${all[*]}"
)]"
if [ -n "$dry" ]; then
    echo "setup: would install ./judges and $spec into .venv (missing: ${needed[*]})"
    exit 0
fi
echo "setup: installing ./judges and $spec into .venv (a minute or two the first time)"
rm -f "$stamp"
"$python" -m pip install -q --upgrade pip
"$python" -m pip install -q uv || echo "setup: uv cannot be installed here; pip installs instead" >&2
# uv installs in about a minute what takes pip three (the test extras' torch with its CUDA
# libraries), with pip's package sources (scripts/pip_config_for_uv.py) and pip's rule of the
# best version over all of them, compiled to bytecode as pip does (the judge's sandboxed
# interpreters cannot write it). One call, so the project's pin on guidance-ttt-judge resolves
# against ./judges (not on PyPI). Where uv fails, pip installs instead.
mapfile -t sources < <("$python" scripts/pip_config_for_uv.py)
if [ -x .venv/bin/uv ] && .venv/bin/uv pip install --python "$python" -q --compile-bytecode \
    --index-strategy unsafe-best-match "${sources[@]}" -e ./judges -e "$spec"; then
    :
else
    [ -x .venv/bin/uv ] && echo "setup: uv could not install (above); pip installs instead" >&2
    "$python" -m pip install -q -e ./judges -e "$spec"
fi
printf '%s\n%s\n' "$hash" "${all[*]}" >"$stamp"
