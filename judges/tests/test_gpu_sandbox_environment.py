"""The GPU sandbox as a place to run PyTorch and Triton, what a failure says, and a freeze that
fails (issue 48), without a GPU.

The judge runs end to end on the CPU stand-in in judges/tests/test_gpu_judge_stand_in.py (the
sandbox's user name and private caches as a candidate sees them, a failure's message, the
bounds on work after DONE); here are the pieces: the sandbox's command line and its identity
files, `failure.describe` on real tracebacks, when a call's inputs arrive (`Session.call`), and
`Session.recheck` with a sandbox whose processes cannot be stopped.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from judges.gpu.launch import CACHE_ENV, LaunchSpec, gpu_bwrap_argv, identity_files
from judges.gpu.sandboxed import control, failure, layout
from judges.gpu.session import FreezeFailed, Session

CANDIDATE = """
def _inner(values):
    try:
        return values["missing"]
    except KeyError as error:
        raise ValueError("the shapes do not match: " + "x" * LENGTH) from error


def custom_kernel(data):
    return _inner(data)
"""


def _spec(tmp_path: Path) -> LaunchSpec:
    return LaunchSpec(
        bwrap="bwrap",
        runner="judge-runner",
        python="/opt/env/bin/python3",
        box=str(tmp_path / "box"),
        backend="cuda",
        entry="custom_kernel",
        device_nodes=("/dev/nvidia0",),
        python_dirs=("/opt/env",),
        tmpfs_bytes=1 << 30,
        cgroup_dirs=(),
    )


def _settings(argv: list[str]) -> dict[str, str]:
    return {argv[i + 1]: argv[i + 2] for i, item in enumerate(argv) if item == "--setenv"}


def test_the_sandbox_names_its_uid_and_keeps_every_compiler_cache_in_its_private_tmp(
    tmp_path: Path,
) -> None:
    names = identity_files(tmp_path / "identity", 64000, 64000)
    argv = gpu_bwrap_argv(_spec(tmp_path), 3, 4, names)
    binds = [tuple(argv[i : i + 3]) for i, item in enumerate(argv) if item == "--ro-bind"]
    assert ("--ro-bind", str(names / "passwd"), "/etc/passwd") in binds
    assert ("--ro-bind", str(names / "group"), "/etc/group") in binds
    passwd = (names / "passwd").read_text().splitlines()
    assert "sandbox:x:64000:64000:candidate:/tmp:/usr/sbin/nologin" in passwd
    assert "sandbox:x:64000:" in (names / "group").read_text().splitlines()
    assert all(os.stat(names / name).st_mode & 0o777 == 0o644 for name in ("passwd", "group"))
    env = _settings(argv)
    assert env["USER"] == env["LOGNAME"] == "sandbox" and env["HOME"] == "/tmp"
    for name in (
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "CUDA_CACHE_PATH",
        "XDG_CACHE_HOME",
        "TORCH_EXTENSIONS_DIR",
    ):
        assert env[name] == CACHE_ENV[name] and env[name].split("/")[1] == "tmp", name
    # /tmp is a fresh tmpfs of this sandbox alone, mounted before anything is bound below it
    tmpfs = argv.index("--tmpfs")
    assert argv[tmpfs + 1] == "/tmp" and argv[tmpfs - 2] == "--size"
    assert env["PATH"].split(":")[0] == "/opt/env/bin"  # the interpreter's tools (ninja)
    # without identity files (a caller of its own): no /etc binds
    assert "/etc/passwd" not in gpu_bwrap_argv(_spec(tmp_path), 3, 4)


def _candidate(tmp_path: Path, length: int) -> Any:
    path = tmp_path / "submission.py"
    path.write_text(CANDIDATE.replace("LENGTH", str(length)))
    spec = importlib.util.spec_from_file_location(f"submission_{length}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _through_the_worker(entry: Any) -> BaseException:
    """`entry({})` called from a frame of the worker's own folder, as the worker calls it;
    the exception it raised."""
    namespace: dict[str, Any] = {}
    own = os.path.join(failure.OWN_FOLDER, "worker.py")
    exec(compile("def call(entry):\n    return entry({})\n", own, "exec"), namespace)
    with pytest.raises(Exception) as caught:
        namespace["call"](entry)
    return caught.value


def test_a_failure_leads_with_the_exception_and_ends_with_the_candidates_frames(
    tmp_path: Path,
) -> None:
    error = _through_the_worker(_candidate(tmp_path, 10).custom_kernel)
    message = failure.describe(error)
    lines = message.splitlines()
    assert lines[0] == "ValueError: the shapes do not match: xxxxxxxxxx"
    assert lines[1] == "raised from KeyError: 'missing'"
    assert lines[2] == "Traceback, innermost last:"
    assert "in custom_kernel" in message and "in _inner" in message
    assert str(tmp_path / "submission.py") in message
    assert "worker.py" not in message  # the worker's own frame is left out


def test_a_long_failure_is_bounded_keeping_its_head_and_its_tail(tmp_path: Path) -> None:
    error = _through_the_worker(_candidate(tmp_path, 50_000).custom_kernel)
    message = failure.describe(error)
    assert len(message) < failure.TEXT_LIMIT + 2000
    assert message.startswith("ValueError: the shapes do not match: xxx")
    assert "characters left out" in message and "in _inner" in message


def test_an_exception_of_a_library_names_its_module() -> None:
    class CompileError(RuntimeError):
        pass

    CompileError.__module__ = "torch._inductor.exc"
    assert failure.headline(CompileError("nvcc failed")) == (
        "torch._inductor.exc.CompileError: nvcc failed"
    )


class _Unfreezable:
    """A running sandbox whose processes never all stop (and that ends when told to)."""

    freezing = "cgroup"

    def __init__(self) -> None:
        self.freezes = self.thaws = 0
        self.running = True
        self.process = self  # `Session._ended` polls the sandbox's process

    def freeze(self, timeout: float = 1.0) -> bool:
        self.freezes += 1
        return False

    def thaw(self) -> None:
        self.thaws += 1

    def alive(self) -> bool:
        return self.running

    def members(self) -> list[int]:
        return [4242]

    def poll(self) -> None:
        pass

    def ended(self) -> str:
        return "ended by the test"

    def oom_kills(self) -> int:
        return 0


class _Link:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any], fds: Any = ()) -> None:
        self.sent.append(message)


class _Transport:
    device = "cpu"

    def __init__(self) -> None:
        self.opened: list[Any] = []

    def synchronize(self) -> None:
        pass

    def open_output(self, descriptor: Any) -> torch.Tensor:
        self.opened.append(descriptor)
        return torch.zeros(1)


def _session(candidate: _Unfreezable, transport: _Transport) -> tuple[Session, control.Control]:
    block = control.Control.create()
    session = Session(
        transport,
        block,
        _Link(),
        candidate,  # type: ignore[arg-type]
        None,
        call_timeout=5.0,
        rtol=0.02,
        atol=0.02,
        compile_budget=5.0,
    )
    return session, block


class _Pool:
    """The case's shared pool: notes, when the inputs are copied in, whether the clock had
    started (`Session.steps` holds `before` from then) and GO was written, then ends the
    sandbox so that the call returns at once."""

    def __init__(self, session: Session, block: control.Control, candidate: _Unfreezable) -> None:
        self.session, self.block, self.candidate = session, block, candidate
        self.seen: list[tuple[bool, int]] = []

    def copy_(self, staging: torch.Tensor) -> None:
        self.seen.append(("before" in self.session.steps, self.block.get(control.GO)))
        self.candidate.running = False


def test_a_calls_inputs_arrive_after_its_clock_starts_with_the_candidate_running() -> None:
    """The inputs are copied into the pool after the clock starts and before GO, so nothing
    of the candidate can use them outside its call; its processes are never stopped for a call
    (a process stopped between calls starts the next on a cold host path)."""
    candidate = _Unfreezable()
    session, block = _session(candidate, _Transport())
    data = (torch.zeros(4),)
    tree, _, nbytes = layout.flatten(data)
    pool = _Pool(session, block, candidate)
    session._case = {
        "tree": tree,
        "pool": pool,
        "staging": torch.zeros(nbytes, dtype=torch.uint8),
        "token": None,
    }
    block.set(control.ARMED, 1)  # the worker is spinning for the call the session arms
    outcome = session.call(data, None)
    assert pool.seen == [(True, 0)]  # the clock had started, GO was not yet written
    assert block.get(control.GO) == 1
    assert candidate.freezes == 0
    assert "ended during the call" in outcome.detail
    block.close()


def test_a_freeze_that_fails_twice_ends_the_recheck_as_the_judges_failure() -> None:
    """The candidate's processes must be stopped while the last call's output is read again;
    when they cannot be, twice, the output is not read and the trial ends as a judge error."""
    candidate, transport = _Unfreezable(), _Transport()
    session, block = _session(candidate, transport)
    session.last = ("descriptor", torch.zeros(1), torch.zeros(1))
    with pytest.raises(FreezeFailed, match="could not be stopped within 1 s, twice"):
        session.recheck()
    assert (candidate.freezes, candidate.thaws) == (2, 2)
    assert transport.opened == []  # the output was never read again
    block.close()


def test_only_a_failed_freeze_makes_the_service_judge_the_submission_again() -> None:
    """The trusted process's end line carries the exception's name first (`trusted.main`);
    a FreezeFailed there is retried once in a fresh trial, other judge errors and every
    verdict are final."""
    from judges.gpu.judge import retryable
    from judges.gpu.record import judge_error_record

    frozen = judge_error_record("FreezeFailed: the candidate's processes could not be stopped")
    assert retryable(frozen)
    assert not retryable(judge_error_record("GPU self-test failed: a 512 x 512 product ..."))
    assert not retryable(
        {
            "status": "done",
            "passed": False,
            "cases": [],
            "error": "FreezeFailed: quoted by a candidate",
        }
    )
