#!/usr/bin/env bash
# Print the path of a Python >= 3.12 interpreter, or explain on stderr and exit 1.
# Order: $PYTHON, python3.13/python3.12 on PATH, then pyenv's installed versions.
set -euo pipefail

is_new_enough() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

candidates=()
if [ -n "${PYTHON:-}" ]; then
    candidates+=("$PYTHON")
fi
for name in python3.14 python3.13 python3.12 python3; do
    if path=$(command -v "$name" 2>/dev/null); then
        candidates+=("$path")
    fi
done
if command -v pyenv >/dev/null 2>&1; then
    root=$(pyenv root)
    for dir in "$root"/versions/3.1[2-9]*; do
        [ -x "$dir/bin/python3" ] && candidates+=("$dir/bin/python3")
    done
fi

for candidate in "${candidates[@]}"; do
    # pyenv shims exist for versions that are installed but not selected; ask pyenv directly.
    if is_new_enough "$candidate"; then
        echo "$candidate"
        exit 0
    fi
done

echo "error: no Python >= 3.12 found (tried: ${candidates[*]:-nothing})." >&2
echo "Install one (e.g. 'pyenv install 3.12' or the python3.12/python3.13 system package)," >&2
echo "or point PYTHON at it: PYTHON=/path/to/python3.12 ./test.sh" >&2
exit 1
