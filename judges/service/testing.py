"""The judge's test-only switches: the variable GUIDANCE_TTT_JUDGE_TEST_MODE, read here only.

    GUIDANCE_TTT_JUDGE_TEST_MODE=kept-sandbox,cgroup=off,gpu-cpu-stand-in python -m judges ...

A comma-separated list of these words (none set: the judge as it ships):

    kept-sandbox      one kept sandbox per submission, put back as it was after each case,
                      instead of a fresh sandbox for every run: it cannot put back the PID,
                      inode, System V id and loopback counters (judges/sandbox/session.py), so
                      it is no part of the shipped judge; tests hold its resets
    cgroup=MODE       which cgroup bounds runs: auto (v2, else v1), v2, v1, or off (no cgroup;
                      the judge then needs --accept-per-process-limits)
    gpu-cpu-stand-in  judge GPU problems on the CPU through the protocol's stand-in (no GPU, no
                      CUDA IPC), so the GPU judge's whole path runs on any host

These exist so that tests reach paths the shipped judge does not take on their host; they are
no part of the judge's `--help`. `judges.service.process.JudgeProcess(test_mode=...)` sets the
variable for the judge it starts. An unknown word is an error naming it and the known words.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from judges.cgroups.groups import MODES

VARIABLE = "GUIDANCE_TTT_JUDGE_TEST_MODE"
WORDS = ("kept-sandbox", "cgroup=MODE", "gpu-cpu-stand-in")


@dataclass(frozen=True)
class Switches:
    """What the variable asks for."""

    kept_sandbox: bool = False
    cgroup: str = "auto"
    gpu_cpu_stand_in: bool = False


def read(environ: Mapping[str, str] = os.environ) -> Switches:
    """The switches set in `environ`; ValueError naming a word that is not one of `WORDS`."""
    found: dict[str, object] = {}
    for word in filter(None, (w.strip() for w in environ.get(VARIABLE, "").split(","))):
        name, equals, value = word.partition("=")
        if word in ("kept-sandbox", "gpu-cpu-stand-in"):
            found[word.replace("-", "_")] = True
        elif name == "cgroup" and equals and value in MODES:
            found["cgroup"] = value
        else:
            raise ValueError(
                f"{VARIABLE}: unknown word {word!r}; known: {', '.join(WORDS)} "
                f"(MODE one of {', '.join(MODES)})"
            )
    return Switches(**found)  # type: ignore[arg-type]
