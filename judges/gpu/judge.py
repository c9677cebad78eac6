"""The service's GPU judge: one submission per GPU at a time, each in its own trusted process.

`GpuJudge.start` runs once at service start-up when a `type: gpu` problem is served: it finds
the GPUs (`--gpus`), checks what GPU judging needs — root (the candidate runs under a uid of its
own), a cgroup (it holds the candidate's processes), an interpreter whose torch can use CUDA
(`--gpu-python`) and the driver's device nodes — and says in one log line either which GPUs it
will use or why there is none. Without one, every submission to a GPU problem is a `judge`
error naming the missing GPU: the harness treats it as an infrastructure fault and stops,
never as a reward of 0.

A submission waits for a free GPU, then `_trial` stages its sandbox folder (the candidate as
`submission.py` beside the worker's modules), creates its cgroup, starts
`python -m judges.gpu.trusted` on that GPU and waits for it within the package's time limit
(then kills it and everything in the cgroup); the record comes from its results lines
(`judges.gpu.record`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from judges.gpu import case_calibration, devices, trial_process
from judges.gpu.launch import PASSED_ENV
from judges.gpu.package import GpuProblem
from judges.gpu.record import build_record, judge_error_record, read_lines
from judges.problems.package import Problem
from judges.sandbox.outcome import judge_memory
from judges.sandbox.runner import Sandbox
from judges.verdicts.judging import error_record

log = logging.getLogger("judges.gpu")

JUDGES_ROOT = trial_process.JUDGES_ROOT
DEFAULT_SANDBOX_UID = 64000  # + the GPU's number: no other process runs as these uids
WALL_GRACE = 60.0


@dataclass(frozen=True)
class GpuOptions:
    """The service flags of the GPU judge (`add_gpu_arguments`)."""

    gpus: str = "all"
    python: str = sys.executable
    sandbox_uid: int = DEFAULT_SANDBOX_UID
    cpu_stand_in: bool = False  # the test switch gpu-cpu-stand-in (judges.service.testing)


def add_gpu_arguments(parser: Any) -> None:
    """The GPU judge's flags on the service's parser."""
    parser.add_argument(
        "--gpus",
        default="all",
        help="GPUs for `type: gpu` problems, by nvidia-smi number, e.g. 0,3 (default: all)",
    )
    parser.add_argument(
        "--gpu-python",
        default=sys.executable,
        help="interpreter with CUDA torch for GPU problems (default: this one, %(default)s)",
    )
    parser.add_argument(
        "--gpu-sandbox-uid",
        type=int,
        default=DEFAULT_SANDBOX_UID,
        help="first uid of GPU candidates; GPU k runs them as this + k (default: %(default)s)",
    )


def options_from(args: Any, switches: Any) -> GpuOptions:
    """The GPU judge's options from the service's flags and its test switches
    (`judges.service.testing.Switches`)."""
    return GpuOptions(args.gpus, args.gpu_python, args.gpu_sandbox_uid, switches.gpu_cpu_stand_in)


class GpuJudge:
    """Judges submissions to GPU problems (module docstring)."""

    def __init__(
        self, problems: list[GpuProblem], options: GpuOptions, sandbox: Sandbox, state_dir: Path
    ) -> None:
        self.problems = problems
        self.options = options
        self.sandbox = sandbox
        self.state_dir = state_dir
        self.gpus: list[devices.Gpu] = []
        self.python_dirs: list[str] = []
        self.env: dict[str, str] = {}
        self.uid_base: int | None = None
        self.cpus_per_gpu = 1  # each GPU's share of this host's CPUs, its sandbox's CPU bound
        self._free: asyncio.Queue[devices.Gpu] | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._running: set[int] = set()
        self._state: dict[int, dict[str, Any]] = {}  # per GPU: what it is doing (`describe`)
        self._finishing: set[asyncio.Future[None]] = set()  # trials whose processes still exit
        self._spares: dict[int, Any] = {}  # per GPU: its next trial, prepared (trial_process)
        self._spare_count = 0
        # per (GPU, problem): the benchmarks' calibration its last measuring trial made
        self._kept: dict[tuple[int, str], case_calibration.Kept] = {}
        self._closed = False

    @classmethod
    def start(
        cls, problems: dict[str, Problem], options: GpuOptions, sandbox: Sandbox, state_dir: Path
    ) -> GpuJudge | None:
        """None when no GPU problem is served; else the judge, its device status set and
        announced in one log line. ValueError for a `--gpus` naming no GPU of this host."""
        served = [p for p in problems.values() if isinstance(p, GpuProblem)]
        if not served:
            return None
        judge = cls(served, options, sandbox, state_dir)
        names = sorted(p.id for p in served)
        try:
            judge._probe()
        except devices.NoGpu as reason:
            for problem in served:
                problem.device.available, problem.device.detail = False, str(reason)
            log.warning(
                "GPU judge: no usable GPU here (%s); submissions to %s are judge errors",
                reason,
                names,
            )
            return judge
        described = ", ".join(gpu.describe() for gpu in judge.gpus)
        for problem in served:
            problem.device.available, problem.device.detail = True, described
        log.info("GPU judge: problems %s on %d GPU(s): %s", names, len(judge.gpus), described)
        for gpu in judge.gpus:  # nothing runs on them yet: each prepares its first trial
            judge.prepare_spare(gpu)
        return judge

    def _probe(self) -> None:
        options = self.options
        if options.cpu_stand_in:
            found = devices.cpu_stand_ins(max(1, len(options.gpus.split(","))))
        else:
            found = devices.select(devices.discover(), options.gpus)
        if os.geteuid() != 0:
            raise devices.NoGpu(
                "GPU judging needs the judge to run as root, so that each candidate runs under "
                "a uid of its own (its sandbox shares the host's PID namespace for CUDA IPC)"
            )
        if self.sandbox.bound is None:
            raise devices.NoGpu("GPU judging needs a cgroup to hold a candidate's processes")
        backend = found[0].backend
        facts = devices.interpreter_facts(options.python, backend)
        for gpu in found:
            missing = devices.missing_nodes(gpu)
            if missing:
                raise devices.NoGpu(f"GPU {gpu.index}: device nodes {missing} do not exist")
        forbidden = [p.directory for p in self.problems] + [self.state_dir, JUDGES_ROOT / "judges"]
        self.python_dirs = devices.sandbox_dirs(facts, forbidden)
        self.env = {k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)}
        passed = [*self.env.get("LD_LIBRARY_PATH", "").split(":"), self.env.get("CUDA_HOME", "")]
        for directory in passed:
            if directory and Path(directory).is_dir() and not directory.startswith("/usr/"):
                self.python_dirs.append(str(Path(directory).resolve()))
        self.uid_base = self._sandbox_uid(found)
        self.cpus_per_gpu = cpu_share(len(found))
        self.gpus = found

    def _sandbox_uid(self, found: list[devices.Gpu]) -> int | None:
        """The first sandbox uid, after checking that it can run the interpreter (its folders
        must be readable by other users). The CPU stand-in falls back to the judge's own uid
        where they are not (a test host's private interpreter), saying so."""
        uid = self.options.sandbox_uid
        try:
            probe = subprocess.run(
                [self.options.python, "-I", "-c", "import torch"],
                user=uid,
                group=uid,
                extra_groups=[],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                cwd="/",
            )
            if probe.returncode == 0:
                return uid
            reason = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        except (OSError, subprocess.TimeoutExpired) as error:
            reason = str(error)
        if found[0].backend == "cpu":
            log.warning(
                "GPU judge (CPU stand-in): uid %d cannot run %s (%s); the stand-in's sandbox "
                "keeps the judge's uid",
                uid,
                self.options.python,
                reason,
            )
            return None
        raise devices.NoGpu(
            f"the sandbox uid {uid} cannot run {self.options.python} ({reason}); install the GPU "
            "interpreter where other users can read it, or choose --gpu-python"
        )

    async def judge(self, problem: GpuProblem, code: str, workdir: Path) -> dict[str, Any]:
        """The final record of one submission (waits for a free GPU)."""
        if not problem.device.available or not self.gpus:
            return error_record(
                f"judge failure: problem {problem.id} needs a GPU and this judge has none "
                f"({problem.device.detail}); serve it on a GPU host",
                "judge",
            )
        if self._free is None:
            self._free = asyncio.Queue()
            for gpu in self.gpus:
                self._free.put_nowait(gpu)
            self._threads = ThreadPoolExecutor(len(self.gpus), thread_name_prefix="gpu")
        gpu = await self._free.get()
        state = self._state.setdefault(gpu.index, {"judged": 0})
        state.update(state="judging", submission=workdir.name, since=round(time.time(), 3))
        loop = asyncio.get_running_loop()
        try:
            record, finish = await loop.run_in_executor(
                self._threads, self._trial, gpu, problem, code, workdir
            )
            if retryable(record):  # the judge's own failure: once more, in a fresh trial
                log.warning(
                    "GPU %d: %s; judging the submission again",
                    gpu.index,
                    record["error"].splitlines()[0],
                )
                await loop.run_in_executor(self._threads, finish)
                record, finish = await loop.run_in_executor(
                    self._threads, self._trial, gpu, problem, code, workdir / "again"
                )
        except BaseException:
            self._release(gpu)
            raise
        # The record is final once the trial wrote its end; the GPU stays this trial's until
        # its processes are gone (`finish`), so the next trial never shares it with them.
        state.update(state="finishing")
        task = asyncio.ensure_future(self._finish(gpu, problem, finish))
        self._finishing.add(task)
        task.add_done_callback(self._finishing.discard)
        return record

    async def _finish(self, gpu: devices.Gpu, problem: GpuProblem, finish: Any) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._threads, finish)
            # the GPU is idle now: its next trial comes up while no submission waits for it
            await loop.run_in_executor(self._threads, self.prepare_spare, gpu, problem)
        finally:
            self._release(gpu)

    def _release(self, gpu: devices.Gpu) -> None:
        state = self._state[gpu.index]
        state.update(
            state="idle", submission=None, since=round(time.time(), 3), judged=state["judged"] + 1
        )
        assert self._free is not None
        self._free.put_nowait(gpu)

    def _trial(
        self, gpu: devices.Gpu, problem: GpuProblem, code: str, workdir: Path
    ) -> tuple[dict[str, Any], Any]:
        """The trial's record, as soon as the trusted process wrote its end (or stopped), and
        the function that waits for it to exit and removes what it leaves. The GPU's spare
        (`judges.gpu.trial_process`) is used when it waits for this problem; else a cold start."""
        settings = problem.settings
        assert settings is not None
        started, origin = time.monotonic(), time.time()
        trial = self._take_spare(gpu, problem)
        if trial is not None:
            try:
                trial.begin(code, origin)
            except OSError as error:  # it ended just now: start cold
                log.warning(
                    "GPU %d: its prepared trial ended (%s); starting cold", gpu.index, error
                )
                self._end_spare(trial)
                trial = None
        if trial is None:
            trial = trial_process.start(
                self, gpu, problem, workdir, code, kept=self.kept_calibration(gpu, problem)
            )
        self._running.add(trial.process.pid)
        try:
            limit = settings.wall_seconds + WALL_GRACE
            text, timed_out = _until_ended(trial.process, trial.results, limit)
            usage = trial.group.usage()  # the candidate's sandbox is gone once the trial ended
        except BaseException:
            trial.end()
            self._running.discard(trial.process.pid)
            raise
        events = read_lines(text)
        if timed_out and not any(e.get("event") == "end" for e in events):
            events += _over_time(problem, events, settings.wall_seconds)
        if not any(e.get("event") == "end" for e in events):
            tail = (trial.workdir / "trusted.log").read_bytes()[-2000:]
            log.error(
                "GPU trial on GPU %d ended without a result: %s",
                gpu.index,
                tail.decode("utf-8", "replace"),
            )
        record = build_record(problem.gpu_cases, events, problem.suite.to_json())
        self.keep_calibration(gpu, problem, events)
        if usage.killed_for_others:  # not the candidate's memory: never its verdict
            detail = judge_memory(usage.oom_kills, usage.peak_bytes, usage.limit_bytes)
            log.error("GPU trial on GPU %d: %s", gpu.index, detail)
            record = judge_error_record(f"the judge ran out of memory: {detail}")
        phases = next((e for e in events if e.get("event") == "phases"), {})
        record["timing"] = {
            "trialSeconds": round(time.monotonic() - started, 3),
            "gpu": gpu.index,
            "startedAt": round(origin, 3),
            "endedAt": round(time.time(), 3),
            "prepared": trial.owns_workdir,  # its processes came up before the submission
            "phases": {k: v for k, v in phases.items() if k != "event"},
            "cpu": {"cpus": self.cpus_per_gpu, **throttling(trial.group.cpu_path)},
        }

        def finish() -> None:
            trial.end()
            self._running.discard(trial.process.pid)

        return record, finish

    def _take_spare(self, gpu: devices.Gpu, problem: GpuProblem) -> Any:
        """The GPU's spare when it waits for `problem`; a dead or failed one is removed."""
        spare = self._spares.pop(gpu.index, None)
        if spare is None:
            return None
        if spare.problem_id == problem.id and spare.ready_to_begin():
            return spare
        why = "another problem" if spare.problem_id != problem.id else "it ended"
        log.warning(
            "GPU %d: its prepared trial for %s cannot be used (%s); starting cold",
            gpu.index,
            spare.problem_id,
            why,
        )
        self._end_spare(spare)
        return None

    def prepare_spare(self, gpu: devices.Gpu, problem: GpuProblem | None = None) -> None:
        """Start GPU `gpu`'s spare for `problem` (by default: the only GPU problem served) —
        only when nothing else runs on that GPU (the service calls this at start and once a
        trial's processes are gone)."""
        if problem is None:
            if len(self.problems) != 1:
                return
            problem = self.problems[0]
        if self._closed or gpu.index in self._spares or not problem.device.available:
            return
        self._spare_count += 1
        folder = self.sandbox.scratch / f"gpu-{gpu.index}-prepared-{self._spare_count}"
        try:
            spare = trial_process.start(
                self,
                gpu,
                problem,
                folder,
                None,
                owns_workdir=True,
                kept=self.kept_calibration(gpu, problem),
            )
        except OSError as error:
            log.warning("GPU %d: cannot prepare its next trial (%s)", gpu.index, error)
            shutil.rmtree(folder, ignore_errors=True)
            return
        self._spares[gpu.index] = spare

    def kept_calibration(
        self, gpu: devices.Gpu, problem: GpuProblem
    ) -> case_calibration.Kept | None:
        """The benchmarks' calibration kept for `problem` on `gpu`, for
        `case_calibration.KEPT_FOR_S` seconds; None: the trial measures its own."""
        kept = self._kept.get((gpu.index, problem.id))
        if kept is None or kept.age() >= case_calibration.KEPT_FOR_S:
            return None
        return kept

    def keep_calibration(
        self, gpu: devices.Gpu, problem: GpuProblem, events: list[dict[str, Any]]
    ) -> None:
        """Keep what a trial measured itself of its benchmarks' calibration (its `startup`
        line, written before its candidate was imported) for the GPU's next trials."""
        startup = next((e for e in events if e.get("event") == "startup"), None)
        measured = case_calibration.kept_from_startup(startup) if startup else None
        if measured is not None:
            self._kept[(gpu.index, problem.id)] = measured

    def _end_spare(self, spare: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(spare.process.pid, signal.SIGKILL)
        spare.end(grace=10.0)

    def close(self) -> None:
        """Kill every trial still running and every spare (service shutdown)."""
        self._closed = True
        for pid in list(self._running):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            self._end_spare(spare)
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)

    def _prepared(self, index: int) -> str | None:
        """`waiting` (the GPU's next trial is ready), `preparing`, or None (no spare)."""
        spare = self._spares.get(index)
        if spare is None:
            return None
        return "waiting" if spare.waiting() else "preparing"

    def describe(self) -> dict[str, Any]:
        """`/health`'s `gpus`: each GPU, whether it is judging (and which submission, since
        when), finishing or idle, how many submissions it judged, and whether its next trial is
        prepared (`judges.gpu.trial_process`: `waiting`, `preparing` or null)."""
        idle = {"state": "idle", "submission": None, "since": None, "judged": 0}
        return {
            "gpus": [
                {
                    **asdict(gpu),
                    **idle,
                    **self._state.get(gpu.index, {}),
                    "prepared": self._prepared(gpu.index),
                }
                for gpu in self.gpus
            ]
        }


END_POLL_S = 0.02  # how often the results file is read for the trial's end


#: A trusted process's failures that say nothing about the candidate and may pass in a fresh
#: trial: the judge tries the submission once more (`judges.gpu.session.FreezeFailed`).
RETRIED_FAILURES = ("FreezeFailed",)


def retryable(record: dict[str, Any]) -> bool:
    """Whether `record` is a judge error that a second trial of the submission may clear."""
    error = str(record.get("error", ""))
    return record.get("errorKind") == "judge" and any(
        f"judge failure: {name}:" in error for name in RETRIED_FAILURES
    )


def cpu_share(gpus: int) -> int:
    """The CPUs a GPU trial's sandbox may use: this host's (those this process may run on)
    shared out among its judging GPUs, at least one. A CPU run gets one CPU
    (`judges.cgroups.cpu`); a GPU candidate's process spins while it waits for its call and
    while the GPU works, so one CPU would leave next to nothing for its other threads (the
    CUDA driver's, PyTorch's, a Triton compile's) and the bound could stop the process in the
    middle of a timed call (judges/README.md)."""
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count() or 1
    return max(1, available // max(1, gpus))


def throttling(cpu_stat: Path | None) -> dict[str, int]:
    """How often the sandbox's CPU bound stopped its processes, and for how long (cgroup v2's
    `nr_throttled` and `throttled_usec` in the group's cpu.stat; nothing elsewhere)."""
    if cpu_stat is None or cpu_stat.name != "cpu.stat":
        return {}
    try:
        fields = dict(line.split() for line in cpu_stat.read_text().splitlines() if " " in line)
    except (OSError, ValueError):
        return {}
    found = {"throttled": fields.get("nr_throttled"), "throttledUs": fields.get("throttled_usec")}
    return {key: int(value) for key, value in found.items() if value is not None}


def _until_ended(process: subprocess.Popen[bytes], results: Path, limit: float) -> tuple[str, bool]:
    """Wait until the trusted process wrote its whole `end` line, exited, or ran past `limit`
    seconds (then it is killed): (the results file's text, whether it was killed for time)."""
    deadline = time.monotonic() + limit
    while True:
        exited = process.poll() is not None
        text = results.read_text() if results.exists() else ""
        if exited or _ended(text):
            return text, False
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return (results.read_text() if results.exists() else ""), True
        time.sleep(END_POLL_S)


def _ended(text: str) -> bool:
    """Whether the results hold a whole `end` line (the trusted process writes it last)."""
    return text.endswith("\n") and any(e.get("event") == "end" for e in read_lines(text[-4096:]))


def _over_time(problem: GpuProblem, events: list[dict[str, Any]], limit: float) -> list[dict]:
    """The events that end a trial the service stopped at the package's time limit: the first
    case without a result fails with Time Limit Exceeded."""
    done = {(e.get("kind"), e.get("index")) for e in events if e.get("event") == "case"}
    extra: list[dict[str, Any]] = []
    if not any(e.get("event") == "startup" for e in events):
        detail = f"the submission exceeded its time limit of {limit:g} s"
        extra.append({"event": "startup", "status": "Time Limit Exceeded", "detail": detail})
    for case in problem.gpu_cases:
        if (case.kind, case.index) not in done:
            extra.append(
                {
                    "event": "case",
                    **case.to_json(),
                    "runStatus": "Time Limit Exceeded",
                    "detail": f"the submission exceeded its time limit of {limit:g} s",
                }
            )
            break
    return [*extra, {"event": "end", "status": "done"}]
