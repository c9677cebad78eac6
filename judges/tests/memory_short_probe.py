"""Run by `test_judge_memory_short.py` in a child process that first moves itself into a small
memory cgroup standing for a judge (or host) short of memory: it compiles and runs programs in
the real sandbox, each run in its own cgroup below that one, and prints what the judge made of
each as one JSON object. argv: the small cgroup's directory, a scratch folder, the bomb source."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

short, scratch, bomb = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
(short / "cgroup.procs").write_text(str(os.getpid()))  # before anything big is imported

from judges.cgroups.groups import detect  # noqa: E402
from judges.sandbox.outcome import Limits  # noqa: E402
from judges.sandbox.runner import Sandbox  # noqa: E402
from judges.sandbox.session import SessionPool  # noqa: E402
from judges.verdicts.judging import CompileLimits, JudgeOutOfMemory, compile_cpp  # noqa: E402

# Touches 400 MiB page by page through a volatile pointer (nothing for the compiler to remove).
FILL = """#include <cstdlib>
int main() {
    volatile char *p = (volatile char *)malloc(400 << 20);
    for (long i = 0; i < (400L << 20); i += 4096) p[i] = 1;
    return p[4096] - 1;
}
"""

bound = detect("auto")
sandbox = Sandbox(scratch / "box", bound=bound)
found: dict[str, str] = {"bound": bound.describe()}
try:
    try:  # the compiler killed for the small cgroup's sake, far below its own 1 GiB
        compile_cpp(sandbox, bomb.read_text(), scratch / "short", CompileLimits())
        found["compile_short"] = "no failure"
    except JudgeOutOfMemory as error:
        found["compile_short"] = f"JudgeOutOfMemory: {error}"
    # The same bomb at a compile bound that the small cgroup can give: the candidate's error.
    own = compile_cpp(
        sandbox, bomb.read_text(), scratch / "own", CompileLimits(memory_bytes=96 << 20)
    )
    found["compile_own"] = own.error.splitlines()[0] if own.error else "compiled"
    filler = compile_cpp(sandbox, FILL, scratch / "fill", CompileLimits())
    assert filler.binary is not None, filler.error
    for name, limit in (("run_short", 1 << 30), ("run_own", 64 << 20)):
        outcome = sandbox.execute(
            ["/box/a"],
            limits=Limits(5, 10, limit, 8, 1 << 20, 1 << 20, address_space=False),
            stdin=None,
            stdout=scratch / f"{name}.out",
            stderr=scratch / f"{name}.err",
            binds=[("ro", filler.binary.parent, "/box")],
            workdir="/box",
        )
        found[name] = f"{outcome.status}: {outcome.detail}"
    binds = [("ro", filler.binary.parent, "/box")]
    pool = SessionPool(sandbox, binds)  # the same two runs in a submission's kept sandbox
    try:
        for name, limit in (("session_run_short", 1 << 30), ("session_run_own", 64 << 20)):
            outcome = pool.execute(
                ["/box/a"],
                limits=Limits(5, 10, limit, 8, 1 << 20, 1 << 20, address_space=False),
                stdin=None,
                stdout=scratch / f"{name}.out",
                stderr=scratch / f"{name}.err",
                binds=binds,
            )
            found[name] = f"{outcome.status}: {outcome.detail}"
    finally:
        pool.close()
finally:
    sandbox.close()
    bound.close()
print(json.dumps(found))
