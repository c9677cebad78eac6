#!/usr/bin/env bash
# Print the path of a Python >= 3.12 interpreter, or say in one line what is needed and where to
# get it (stderr, exit 1). Order: $PYTHON, python3.1x on PATH (newest first), python3, then
# pyenv's installed 3.12+ versions.
set -euo pipefail

is_new_enough() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

candidates=()
if [ -n "${PYTHON:-}" ]; then
    candidates+=("$PYTHON")
fi
for minor in 19 18 17 16 15 14 13 12; do
    if path=$(command -v "python3.$minor" 2>/dev/null); then
        candidates+=("$path")
    fi
done
if path=$(command -v python3 2>/dev/null); then
    candidates+=("$path")
fi
if command -v pyenv >/dev/null 2>&1; then
    # pyenv shims exist for versions that are installed but not selected: ask each version.
    root=$(pyenv root)
    for dir in "$root"/versions/3.1[2-9]*; do
        [ -x "$dir/bin/python3" ] && candidates+=("$dir/bin/python3")
    done
fi

for candidate in "${candidates[@]}"; do
    if is_new_enough "$candidate"; then
        echo "$candidate"
        exit 0
    fi
done

echo "error: this project needs Python >= 3.12 and none was found (tried: ${candidates[*]:-nothing});" \
    "install one ('pyenv install 3.12', or the python3.12 package of your system) or name it:" \
    "PYTHON=/path/to/python3.12 ./${SETUP_COMMAND:-run.sh}" >&2
exit 1
