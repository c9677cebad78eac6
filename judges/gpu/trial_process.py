"""Starting one GPU trial's processes: the trusted process, which starts the candidate's sandbox.

`start` stages the sandbox's folder (`/box`: the worker's modules, and the candidate as
`submission.py` when it is known), creates the candidate's cgroup, writes the trial's spec and
starts `python -m judges.gpu.trusted` on the GPU. Started without a submission it is a *spare*:
its interpreter, torch, CUDA context, self-test, the tests' inputs and reference outputs (fixed
seeds), the comparison kernel, and the candidate's sandbox with its own interpreter, torch and
CUDA context all come up while no submission waits, and it then waits, idle, for
`TrialProcess.begin`: the service writes the candidate into `/box` (a folder bound read-only
into the sandbox, so the file appears there) and sends the trial's secret and start time on
the trusted process's stdin (never on disk). Only then is anything calibrated or timed, and
only then is the candidate's code imported: a spare holds nothing of any submission, and one
spare serves one submission.

The service starts a GPU's spare when that GPU's previous trial has ended and its processes
are gone (`judges.gpu.judge`), so a spare's preparation never overlaps anything timed on that
GPU. A spare that died or failed while it prepared is removed and the submission starts cold.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.cgroups.groups import RunGroup
from judges.gpu.case_calibration import Kept
from judges.gpu.package import GpuProblem
from judges.gpu.sandboxed import STAGED

JUDGES_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the `judges` package
SANDBOXED = Path(__file__).with_name("sandboxed")
EXIT_GRACE_S = 30.0  # seconds the trusted process has to exit after its end, then killed
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass
class TrialProcess:
    """A started trusted process and what belongs to its trial."""

    process: subprocess.Popen[bytes]
    group: RunGroup
    workdir: Path
    box: Path
    results: Path
    problem_id: str
    spare: bool  # waiting for `begin`
    owns_workdir: bool  # a spare's folder is its own, removed by `end`

    def ready_to_begin(self) -> bool:
        """A spare still waiting: alive, and nothing (a failure) in its results."""
        if not self.spare or self.process.poll() is not None:
            return False
        return not (self.results.exists() and self.results.stat().st_size)

    def waiting(self) -> bool:
        """A spare that finished preparing and waits for its submission."""
        return self.spare and (self.workdir / "waiting").exists() and self.ready_to_begin()

    def begin(self, code: str, origin: float) -> None:
        """Hand a spare its submission: the candidate into /box, then the go with the secret."""
        assert self.spare and self.process.stdin is not None
        submission = self.box / "submission.py"
        submission.write_text(code)
        submission.chmod(0o644)
        go = {"secret": secrets.randbelow(1 << 30), "origin": origin}
        self.process.stdin.write((json.dumps(go) + "\n").encode())
        self.process.stdin.close()
        self.spare = False

    def end(self, grace: float = EXIT_GRACE_S) -> None:
        """Wait for the trusted process to exit (killed after `grace`), then remove the
        candidate's group, killing whatever is left in it, and a spare's own folder."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.group.remove()
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def start(
    judge: Any,
    gpu: Any,
    problem: GpuProblem,
    workdir: Path,
    code: str | None,
    owns_workdir: bool = False,
    kept: Kept | None = None,
) -> TrialProcess:
    """Start a trial's trusted process for `problem` on `gpu` (`judge` is the GpuJudge: its
    sandbox, options and the sandbox's interpreter folders); a spare when `code` is None.
    `kept`: the benchmarks' calibration an earlier trial on this GPU measured, to use instead
    of measuring (`judges.gpu.case_calibration`)."""
    settings = problem.settings
    assert settings is not None and judge.sandbox.bound is not None
    box = stage(workdir, code)
    group = judge.sandbox.bound.create(
        settings.memory_bytes, settings.processes, judge.cpus_per_gpu
    )
    results = workdir / "results.jsonl"
    spec = {
        "settings": settings.to_json(),
        "cases": [case.to_json() for case in problem.gpu_cases],
        "results": str(results),
        "workdir": str(workdir),
        "procs_fds": group.procs_fds,
        "launch": {
            "bwrap": shutil.which("bwrap") or "bwrap",
            "runner": str(judge.sandbox.runner),
            "python": judge.options.python,
            "box": str(box),
            "backend": gpu.backend,
            "entry": settings.entry,
            "device_nodes": [n for n in gpu.nodes if Path(n).exists()],
            "python_dirs": judge.python_dirs,
            "tmpfs_bytes": settings.tmpfs_bytes,
            "cgroup_dirs": [str(d) for d in group.directories],
            "uid": None if judge.uid_base is None else judge.uid_base + gpu.index,
            "env": {**judge.env, "CUDA_VISIBLE_DEVICES": gpu.uuid}
            if gpu.backend == "cuda"
            else {"OMP_NUM_THREADS": "1"},
        },
    }
    if kept is not None:
        spec["keptCalibration"] = kept.to_spec()
    if code is None:
        spec["spare"] = True
    else:
        spec.update(secret=secrets.randbelow(1 << 30), origin=time.time())
    (workdir / "spec.json").write_text(json.dumps(spec))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C",
        "PYTHONPATH": str(JUDGES_ROOT),
        **judge.env,
        **NO_MULTICAST,
        "TRITON_CACHE_DIR": str(judge.state_dir / "trusted-triton-cache"),
    }
    if gpu.backend == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
    try:
        with open(workdir / "trusted.log", "wb") as trusted_log:
            process = subprocess.Popen(
                [judge.options.python, "-m", "judges.gpu.trusted", str(workdir / "spec.json")],
                cwd=workdir,
                stdout=trusted_log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.PIPE if code is None else subprocess.DEVNULL,
                pass_fds=tuple(group.procs_fds),
                env=env,
                start_new_session=True,
            )
    except BaseException:
        group.remove()
        raise
    finally:
        group.close_fds()
    return TrialProcess(
        process, group, workdir, box, results, problem.id, code is None, owns_workdir
    )


def stage(workdir: Path, code: str | None) -> Path:
    """The sandbox's /box: the worker's modules in judge/, the candidate as submission.py
    (later, for a spare)."""
    workdir.mkdir(parents=True, exist_ok=True)
    workdir.chmod(0o711)
    box = workdir / "box"
    (box / "judge").mkdir(parents=True)
    if code is not None:
        (box / "submission.py").write_text(code)
    for name in STAGED:
        shutil.copyfile(SANDBOXED / name, box / "judge" / name)
    for path in (box, box / "judge"):
        path.chmod(0o755)
    for path in [*box.glob("*.py"), *(box / "judge").iterdir()]:
        path.chmod(0o644)
    return box
