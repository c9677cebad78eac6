#!/usr/bin/env bash
# Install the system packages a command needs, if any are missing (scripts/setup.sh calls it):
#   scripts/system-packages.sh [run|test]     (default: test, everything)
# For both: git-lfs (Reef's artifact store), bubblewrap (the judge sandbox; 0.8 or newer, which
#   Debian 12 and Ubuntu 24.04 ship), g++ (compiling candidates), the system Python's numpy
#   (Python candidates run in the judge sandbox under /usr/bin/python3). For the tests only: the shell linter
#   and chromium (the headless browser the tests of `guidance-ttt browse` drive through
#   Playwright; they skip without it). With GUIDANCE_TTT_SETUP_DRY_RUN=1 it only says what it
#   would install. The judge's cgroup bound needs no package: it writes the cgroup file system
#   directly (as root, or in a delegated cgroup v2 subtree).
set -euo pipefail

purpose=${1:-test}
declare -A command_of=([git-lfs]=git-lfs [bubblewrap]=bwrap [g++]=g++)
if [ "$purpose" = test ]; then
    command_of+=([shellcheck]=shellcheck [chromium]=chromium)
fi
missing=()
for package in "${!command_of[@]}"; do
    command -v "${command_of[$package]}" >/dev/null 2>&1 || missing+=("$package")
done
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || missing+=(python3-numpy)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if [ -n "${GUIDANCE_TTT_SETUP_DRY_RUN:-}" ]; then
    echo "setup: would install system packages: ${missing[*]}"
    exit 0
fi
echo "installing system packages: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo_cmd=(sudo)
    else
        echo "error: missing system packages ${missing[*]} and not root (no sudo)." >&2
        echo "Install them with your package manager, then run this again." >&2
        exit 1
    fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: missing system packages ${missing[*]} and no apt-get here; install them by hand." >&2
    exit 1
fi
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
