#!/usr/bin/env bash
# Set up everything on a fresh machine (scripts/setup.sh test: system packages with the test
# tools, a Python >= 3.12 venv in .venv, the project with all extras) and run the whole test
# suite: ruff, shellcheck, pytest.
# Extra arguments go to pytest (e.g. ./test.sh -k archive). ./test.sh --quick leaves out the
# tests marked slow (real stacks, full runs, clusters): for iteration, never instead of the suite.
set -euo pipefail
cd "$(dirname "$0")"

# Three workers on two cores (about a quarter of the suite's time waits on servers and
# sandboxes, which a third worker fills), each taking whole test modules (a module's shared
# stack stays in one process), in a random order whose seed pytest prints first
# (pytest-randomly; repeat one order with ./test.sh --randomly-seed=N): the modules with slow
# tests first, then the rest, each group shuffled (tests/conftest.py), so no long module starts
# last while the other workers idle.
# Extra arguments come last and win: -n 0 runs serially.
selection=(-n 3 --dist loadfile --no-loadscope-reorder)
if [ "${1:-}" = "--quick" ]; then
    shift
    selection+=(-m "not slow")
fi

bash scripts/setup.sh test  # idempotent: installs nothing once set up (scripts/setup.sh)
echo "using .venv ($(.venv/bin/python --version))"

echo "== ruff check"
.venv/bin/ruff check .
echo "== ruff format --check"
.venv/bin/ruff format --check .
echo "== shellcheck"
shellcheck -x test.sh run.sh scripts/*.sh .ci/run

echo "== pytest"
# Keep compiled bytecode (ignored by git): with PYTHONDONTWRITEBYTECODE set, every CLI, Reef and
# judge process of the suite compiles the project's sources again and every worker rewrites
# every test module's asserts again.
unset PYTHONDONTWRITEBYTECODE
status=0
.venv/bin/python -m pytest "${selection[@]}" "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "error: pytest collected no tests (exit 5) — the suite is missing or the selection is empty" >&2
    exit 1
fi
exit "$status"
