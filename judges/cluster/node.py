"""What runs on a Ray worker node: the sandbox, the node's checker cache, compile and case tasks.

Each worker process sets up its own `Sandbox` (bubblewrap, g++, the runner, the cgroup bound:
the same checks as the local judge's start) on its first task and keeps it; a node that cannot
is refused by the front when it probes it (`probe`). The sandbox's scratch folder is
`<node root>/scratch/<pid>`; the node root (default `<tmp>/guidance-ttt-judge-node-<uid>`, or
$GUIDANCE_TTT_JUDGE_NODE_DIR) also holds what the node's processes share: problem packages
(`judges.cluster.bundles`) and compiled checkers and interactors (`programs/`), each written
once per node under a file lock, so a checker is compiled once per node and kept there.

`compile_program` and `run_cases` call the very functions the local judge calls
(`prepare_candidate`, `judge_case`), so a case gets the same record on a node as locally.
A task's work folder is removed when it ends; the scratch folders of worker processes that are
gone are removed by the next process that starts on the node.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.cluster.bundles import NodeProblems, ProblemBundle, node_lock
from judges.sandbox.runner import Sandbox, SandboxUnavailable
from judges.sandbox.session import SessionPool
from judges.verdicts.cases import judge_case
from judges.verdicts.fingerprints import judge_code
from judges.verdicts.judging import Compiled, CompileLimits, prepare_candidate
from judges.verdicts.programs import ProgramCache

NODE_DIR_ENV = "GUIDANCE_TTT_JUDGE_NODE_DIR"
SYSTEM_PYTHON = Path("/usr/bin/python3")


@dataclass(frozen=True)
class NodeSettings:
    """How every node sets up its sandbox and shapes records (the front's flags)."""

    cgroup: str
    accept_per_process_limits: bool
    sandbox_uid: int
    compile_limits: CompileLimits
    output_field_bytes: int
    needs_python: bool = False  # a served problem runs /usr/bin/python3 (Python, verifiers)
    sandbox_sessions: bool = False  # kept sandboxes (sandbox.session); by default one per run


@dataclass(frozen=True)
class RemoteProgram:
    """A prepared candidate as bytes: the binary (or Python source), how to run it."""

    data: bytes
    command: tuple[str, ...]
    mount: str


def node_root() -> Path:
    """The folder this node's judge processes share."""
    configured = os.environ.get(NODE_DIR_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"guidance-ttt-judge-node-{os.geteuid()}"


class NodeState:
    """This worker process's sandbox, checker cache and problem copies."""

    def __init__(self, settings: NodeSettings) -> None:
        from judges.sandbox.bounds import memory_bound  # the local judge's bound, same refusal

        if settings.needs_python and not SYSTEM_PYTHON.is_file():
            raise SandboxUnavailable(f"{SYSTEM_PYTHON} is missing; install the python3 package")
        self.root = node_root()
        scratch_parent = self.root / "scratch"
        scratch_parent.mkdir(parents=True, exist_ok=True)
        for folder in (self.root, scratch_parent):
            folder.chmod(0o711)  # the sandbox user reaches its files below
        _remove_stale_scratch(scratch_parent)
        self.scratch = scratch_parent / str(os.getpid())
        self.bound = memory_bound(settings.cgroup, settings.accept_per_process_limits)
        try:
            self.sandbox = Sandbox(self.scratch, settings.sandbox_uid, None, self.bound)
            self.sandbox.check()
        except BaseException:
            if self.bound is not None:
                self.bound.close()
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        self.programs = ProgramCache(self.sandbox, self.root / "programs", settings.compile_limits)
        self.problems = NodeProblems(self.root)
        atexit.register(self.close)

    def checker(self, problem: Any, digest: str) -> tuple[Path | None, str]:
        """The problem's compiled checker or interactor, compiled once per node."""
        with node_lock(self.root / "programs" / f".{digest}.lock"):
            return self.programs.program(problem)

    def work(self, label: str) -> Path:
        return self.scratch / f"{label}-{uuid.uuid4().hex}"

    def close(self) -> None:
        self.sandbox.close()
        if self.bound is not None:
            self.bound.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


_STATES: dict[NodeSettings, NodeState] = {}
_STATES_LOCK = threading.Lock()


def node_state(settings: NodeSettings) -> NodeState:
    """This process's NodeState for `settings`, set up on first use (SandboxUnavailable if
    this node cannot run the sandbox)."""
    with _STATES_LOCK:
        if settings not in _STATES:
            _STATES[settings] = NodeState(settings)
        return _STATES[settings]


def probe(settings: NodeSettings) -> dict[str, Any]:
    """Whether this node can judge: its host name, and the reason when it cannot."""
    found: dict[str, Any] = {"host": socket.gethostname(), "code": judge_code()}
    try:
        node_state(settings)
    except (SandboxUnavailable, OSError, ValueError) as error:
        return {**found, "ok": False, "error": str(error)}
    return {**found, "ok": True, "error": ""}


def compile_program(
    settings: NodeSettings, code: str, language: str
) -> tuple[str, RemoteProgram | None]:
    """Compile (or stage) a candidate in this node's sandbox: ("", the program) or the
    compile error text and None. Raises JudgeFailure when the sandbox failed."""
    state = node_state(settings)
    workdir = state.work("compile")
    try:
        compiled = prepare_candidate(
            state.sandbox, code, language, workdir, settings.compile_limits
        )
        if compiled.binary is None:
            return compiled.error, None
        data = compiled.binary.read_bytes()
        return "", RemoteProgram(data, tuple(compiled.command), compiled.mount)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run_cases(
    settings: NodeSettings,
    digest: str,
    bundle: list[Any],
    program: RemoteProgram,
    numbers: tuple[int, ...],
) -> tuple[list[dict[str, Any]], str, str]:
    """Judge cases `numbers` of problem `digest`, one after another (`bundle`: [its ObjectRef],
    fetched only when the node lacks the problem): (their records, this node's id, where the
    checker came from)."""
    import ray  # only ever called in a Ray worker

    state = node_state(settings)
    package: ProblemBundle | None = None
    if not state.problems.known(digest):
        package = ray.get(bundle[0])
    problem = state.problems.get(digest, package)
    checker, origin = state.checker(problem, digest)
    workdir = state.work(f"cases-{numbers[0]}")
    sessions: SessionPool | None = None
    try:
        build = workdir / "build"
        build.mkdir(parents=True)
        binary = build / program.mount
        binary.write_bytes(program.data)
        binary.chmod(0o755)
        compiled = Compiled(binary, "", program.command, program.mount)
        keep = settings.output_field_bytes
        if problem.kind != "interactive" and settings.sandbox_sessions:  # kept (tests only)
            sessions = SessionPool(state.sandbox, [("ro", binary, f"/box/{program.mount}")])
        records = [
            judge_case(
                state.sandbox,
                compiled,
                state.problems.case(problem, digest, number),
                problem,
                workdir,
                checker,
                keep,
                sessions,
            )
            for number in numbers
        ]
    finally:
        if sessions is not None:
            sessions.close()
        shutil.rmtree(workdir, ignore_errors=True)
    return records, ray.get_runtime_context().get_node_id(), origin


def _remove_stale_scratch(parent: Path) -> None:
    """Remove the scratch folders of this node's worker processes that no longer run."""
    for folder in parent.iterdir():
        if not folder.name.isdigit() or int(folder.name) == os.getpid():
            continue
        try:
            os.kill(int(folder.name), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # it runs (as another user)
