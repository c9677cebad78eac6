"""The candidate's sandbox on a GPU: its bubblewrap command line, start, freeze, thaw and kill.

Like the CPU sandbox (judges/sandbox/argv.py) it has new user, IPC, network, UTS and cgroup
namespaces (no network at all, no further user namespace), a read-only root of `/usr` and the
interpreter's folders, a private size-limited `/tmp`, a minimal `/dev`, and it is held by a
cgroup of its own (memory without swap, processes) that the trusted process created for it.
Unlike it, it keeps the host's PID namespace, because the driver's legacy CUDA IPC names the
exporting process by PID; the candidate therefore runs under a uid of its own (no other
process runs as it), so it cannot signal or trace the judge's processes, and the cgroup —
not a PID-1 supervisor — is what kills everything it started. Only the chosen GPU's device
node is bound, with the driver's control nodes.

It is also an ordinary place to run PyTorch and Triton: `/etc/passwd` and `/etc/group` (bound
read-only from the trial's folder) name the candidate's uid and gid `sandbox`, as `USER` and
`LOGNAME` do, so `getpass.getuser()` (which PyTorch's compiler asks to place its caches) works;
every compiler cache — Triton's, Inductor's, CUDA's JIT, `torch.utils.cpp_extension`'s
builds, XDG's — points into the sandbox's own `/tmp`, a tmpfs of this trial alone, so no
candidate sees another's. The interpreter's own `bin` folder leads `PATH` (`ninja` for
`load_inline`), and `CUDA_HOME` is passed through when the judge has it.

`gpu_bwrap_argv` is pure; `CandidateProcess` starts and controls the running sandbox.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from judges.sandbox.argv import system_binds

SANDBOX_PATH = "/usr/bin:/bin"
WORKER = "/box/judge/worker.py"
#: The judge's variables the candidate's process gets too (their folders bound read-only, outside
#: /usr): what locates the driver's libraries, and the CUDA toolkit for `load_inline`.
PASSED_ENV = ("LD_LIBRARY_PATH", "CUDA_HOME")
#: The sandbox user's name (its passwd and group entries, `USER`, `LOGNAME`).
SANDBOX_USER = "sandbox"
#: Where each compiler keeps its cache: the sandbox's private /tmp (module docstring).
CACHE_ENV = {
    "XDG_CACHE_HOME": "/tmp/cache",
    "TRITON_CACHE_DIR": "/tmp/cache/triton",
    "TORCHINDUCTOR_CACHE_DIR": "/tmp/cache/inductor",
    "CUDA_CACHE_PATH": "/tmp/cache/nv",
    "TORCH_EXTENSIONS_DIR": "/tmp/cache/torch_extensions",
}
#: Kept off in every GPU program started here (NVLink multicast can take a host's GPUs down).
FIXED_ENV = {
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C",
    "PATH": SANDBOX_PATH,
    "USER": SANDBOX_USER,
    "LOGNAME": SANDBOX_USER,
    **CACHE_ENV,
    "PYTHONDONTWRITEBYTECODE": "1",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class LaunchSpec:
    """Everything the candidate's sandbox is made of (passed from the service as JSON)."""

    bwrap: str
    runner: str  # judge-runner, for `--enter-cgroups`
    python: str
    box: str  # host folder mounted at /box: submission.py and judge/ (the staged modules)
    backend: str  # "cuda" or "cpu" (the stand-in)
    entry: str
    device_nodes: tuple[str, ...]
    python_dirs: tuple[str, ...]
    tmpfs_bytes: int
    cgroup_dirs: tuple[str, ...]
    uid: int | None = None  # set when the judge runs as root
    env: dict[str, str] = field(default_factory=dict)


def identity_files(folder: Path, uid: int, gid: int) -> Path:
    """Write `passwd` and `group` naming `uid` and `gid` as the sandbox's user into `folder`
    (readable by that uid); the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    # root's entries unless the sandbox's own ids are 0 (a judge not switching uids)
    entries = {
        "passwd": ("" if uid == 0 else "root:x:0:0:root:/root:/usr/sbin/nologin\n")
        + f"{SANDBOX_USER}:x:{uid}:{gid}:candidate:/tmp:/usr/sbin/nologin\n",
        "group": ("" if gid == 0 else "root:x:0:\n") + f"{SANDBOX_USER}:x:{gid}:\n",
    }
    for name, text in entries.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o644)
    return folder


def gpu_bwrap_argv(
    spec: LaunchSpec, control_fd: int, socket_fd: int, identity: Path | None = None
) -> list[str]:
    """bubblewrap's command line running the worker (module docstring); `identity` is the
    folder of `identity_files`."""
    argv = [
        spec.bwrap,
        "--unshare-user",
        "--unshare-ipc",
        "--unshare-net",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    path = f"{Path(spec.python).parent}:{SANDBOX_PATH}"
    for name, value in {**FIXED_ENV, "PATH": path, **spec.env}.items():
        argv += ["--setenv", name, value]
    argv += system_binds()
    if identity is not None:
        for name in ("passwd", "group"):
            argv += ["--ro-bind", str(identity / name), f"/etc/{name}"]
    # The host's /proc: no PID namespace of its own (module docstring); procfs itself keeps
    # other users' process details unreadable.
    argv += ["--bind", "/proc", "/proc", "--ro-bind-try", "/sys", "/sys", "--dev", "/dev"]
    for node in spec.device_nodes:
        argv += ["--dev-bind", node, node]
    argv += ["--size", str(spec.tmpfs_bytes), "--tmpfs", "/tmp"]
    # After the private /tmp: an interpreter (a venv) that lives under the host's /tmp stays
    # visible at its own path instead of being hidden by the new tmpfs.
    for directory in spec.python_dirs:
        argv += ["--ro-bind", directory, directory]
    argv += ["--ro-bind", spec.box, "/box"]
    argv += ["--remount-ro", "/", "--chdir", "/box", "--"]
    argv += [spec.python, "-I", "-B", WORKER, str(control_fd), str(socket_fd), spec.backend]
    return [*argv, spec.entry]


class CandidateProcess:
    """The running sandbox: liveness, freezing it for the recheck, and killing all of it."""

    def __init__(
        self,
        spec: LaunchSpec,
        control_fd: int,
        socket_fd: int,
        procs_fds: tuple[int, ...],
        stdout: Path,
        stderr: Path,
    ) -> None:
        self.spec = spec
        self.stderr = stderr
        self.dirs = [Path(d) for d in spec.cgroup_dirs]
        entering = [spec.runner, "--enter-cgroups", ",".join(map(str, procs_fds)), "--"]
        uid = os.getuid() if spec.uid is None else spec.uid
        gid = os.getgid() if spec.uid is None else spec.uid
        names = identity_files(stdout.parent / "identity", uid, gid)
        argv = [*entering, *gpu_bwrap_argv(spec, control_fd, socket_fd, names)]
        identity = {}
        if spec.uid is not None:
            identity = {"user": spec.uid, "group": spec.uid, "extra_groups": []}
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            self.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=(control_fd, socket_fd, *procs_fds),
                start_new_session=True,
                env={"PATH": SANDBOX_PATH, "LANG": "C"},
                **identity,
            )
        self.freezing = (
            "cgroup" if (self.dirs and (self.dirs[0] / "cgroup.freeze").exists()) else "signal"
        )
        self._stopped: list[int] = []
        self._freeze_fds: tuple[int, int] | None = None  # cgroup.freeze, cgroup.events
        if self.freezing == "cgroup":  # opened once: a recheck freezes and thaws up to twice
            self._freeze_fds = (
                os.open(self.dirs[0] / "cgroup.freeze", os.O_WRONLY | os.O_CLOEXEC),
                os.open(self.dirs[0] / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC),
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def ended(self) -> str:
        """How the sandbox ended, in words (after it did)."""
        code = self.process.poll()
        if code is None:
            return "still running"
        if self.oom_kills():
            return "killed at its memory limit (the cgroup's out-of-memory killer)"
        how = f"exit status {code}" if code >= 0 else f"killed by signal {-code}"
        return f"{how}{self.stderr_tail()}"

    def stderr_tail(self, limit: int = 1500) -> str:
        """The end of the sandbox's stderr (bubblewrap's or the candidate's), for messages."""
        try:
            data = self.stderr.read_bytes()[-limit:].decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f"; its stderr ends: {data}" if data else ""

    def oom_kills(self) -> int:
        for directory in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                with contextlib.suppress(OSError, ValueError):
                    for line in (directory / name).read_text().splitlines():
                        key, _, value = line.partition(" ")
                        if key == "oom_kill" and int(value) > 0:
                            return int(value)
        return 0

    def members(self) -> list[int]:
        pids: set[int] = set()
        for directory in self.dirs:
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
        return sorted(pids)

    def freeze(self, timeout: float = 1.0) -> bool:
        """Stop every process of the sandbox (their GPU work already queued runs on); True
        once all are stopped."""
        deadline = time.monotonic() + timeout
        if self._freeze_fds is not None:
            freeze, events = self._freeze_fds
            os.write(freeze, b"1")
            while time.monotonic() < deadline:
                if b"frozen 1" in os.pread(events, 4096, 0):
                    return True
            return False
        self._stopped = self.members()
        for pid in self._stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        while time.monotonic() < deadline:
            if all(_stopped(pid) for pid in self._stopped):
                return True
        return False

    def thaw(self) -> None:
        if self._freeze_fds is not None:
            os.write(self._freeze_fds[0], b"0")
            return
        for pid in self._stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._stopped = []

    def kill(self) -> None:
        """Kill every process of the sandbox and reap bubblewrap."""
        if self.dirs and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
        for _ in range(3):
            for pid in self.members():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        if self._freeze_fds is not None:
            for fd in self._freeze_fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._freeze_fds = None


def _stopped(pid: int) -> bool:
    """Whether every thread of `pid` is stopped (or it is gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for task in tasks:
        try:
            state = Path(f"/proc/{pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("T", "t", "Z", "X"):
            return False
    return True
