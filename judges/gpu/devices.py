"""Which GPUs this judge may use, and what a candidate's sandbox needs to reach one.

GPUs are read from the NVIDIA driver's `/proc/driver/nvidia/gpus/<bus>/information` (model,
UUID, device minor) and numbered in PCI bus order, as `nvidia-smi` numbers them; `--gpus 0,3`
picks by that number (default: all). A candidate's sandbox gets `/dev/nvidia<minor>` of its GPU
and the driver's shared nodes (`/dev/nvidiactl`, `/dev/nvidia-uvm`, `/dev/nvidia-uvm-tools`),
and `CUDA_VISIBLE_DEVICES=<uuid>` so that CUDA sees that one GPU whatever the numbering.

`interpreter_facts` asks the GPU interpreter (`--gpu-python`) for its folders and whether its
torch can use CUDA: the sandbox binds those folders read-only, and a judge whose interpreter
cannot use CUDA has no usable GPU. `CpuStandIn` is the device of the CPU stand-in (tests only).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")
SHARED_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


class NoGpu(RuntimeError):
    """No usable GPU here; the message says why in one line."""


@dataclass(frozen=True)
class Gpu:
    """One GPU a submission can get: its number, name, UUID and device nodes."""

    index: int
    name: str
    uuid: str
    nodes: tuple[str, ...]
    backend: str = "cuda"

    def describe(self) -> str:
        return f"{self.index} {self.name} ({self.uuid})"


def discover(root: Path = DRIVER_GPUS) -> list[Gpu]:
    """Every GPU the driver lists, in PCI bus order; NoGpu when there is no driver or GPU."""
    if not root.is_dir():
        raise NoGpu(f"no NVIDIA driver here ({root} does not exist)")
    found = []
    for index, folder in enumerate(sorted(root.iterdir())):
        fields = {}
        for line in (folder / "information").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        minor = fields.get("Device Minor", "")
        found.append(
            Gpu(
                index,
                fields.get("Model", "NVIDIA GPU"),
                fields.get("GPU UUID", ""),
                (f"/dev/nvidia{minor}", *SHARED_NODES),
            )
        )
    if not found:
        raise NoGpu(f"the NVIDIA driver lists no GPU in {root}")
    return found


def select(gpus: list[Gpu], wanted: str) -> list[Gpu]:
    """`all`, or a comma-separated list of GPU numbers; ValueError naming an unknown one."""
    if wanted.strip().lower() in ("", "all"):
        return gpus
    by_index = {gpu.index: gpu for gpu in gpus}
    chosen = []
    for part in wanted.split(","):
        try:
            number = int(part)
        except ValueError:
            raise ValueError(f"--gpus {wanted!r}: {part!r} is not a GPU number") from None
        if number not in by_index:
            raise ValueError(
                f"--gpus {wanted!r}: there is no GPU {number} (have {sorted(by_index)})"
            )
        chosen.append(by_index[number])
    return chosen


def missing_nodes(gpu: Gpu) -> list[str]:
    return [node for node in gpu.nodes if not Path(node).exists() and not node.endswith("tools")]


_FACTS = r"""
import json, os, site, sys
dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages()}
facts = {"dirs": sorted(d for d in dirs if os.path.isdir(d)), "executable": sys.executable}
try:
    import torch
    facts["torch"] = torch.__version__
    facts["cuda"] = bool(sys.argv[1] == "cuda" and torch.cuda.is_available())
    if facts["cuda"]:
        torch.empty(1, device="cuda")
        facts["devices"] = torch.cuda.device_count()
except Exception as error:
    facts["error"] = f"{type(error).__name__}: {error}"
print(json.dumps(facts))
"""


def interpreter_facts(python: str, backend: str, timeout: float = 120.0) -> dict[str, object]:
    """The interpreter's folders and torch facts; NoGpu naming what is wrong."""
    try:
        done = subprocess.run(
            [python, "-c", _FACTS, backend],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NoGpu(f"the GPU interpreter {python} cannot be run: {error}") from None
    try:
        facts = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise NoGpu(f"the GPU interpreter {python} failed: {done.stderr.strip()[-300:]}") from None
    if "error" in facts:
        raise NoGpu(f"torch cannot be imported by {python}: {facts['error']}")
    if backend == "cuda" and not facts.get("cuda"):
        raise NoGpu(f"torch {facts.get('torch')} in {python} cannot use CUDA here")
    return facts


def sandbox_dirs(facts: dict[str, object], forbidden: list[Path]) -> list[str]:
    """The interpreter's folders to bind read-only, outside /usr (bound anyway); NoGpu when one
    of them holds a folder the candidate must not see (the judge's package or state)."""
    chosen = []
    for item in facts.get("dirs", []):  # type: ignore[union-attr]
        path = Path(str(item)).resolve()
        if path == Path("/usr") or Path("/usr") in path.parents:
            continue
        for secret in forbidden:
            secret = secret.resolve()
            if path == secret or path in secret.parents:
                raise NoGpu(
                    f"the GPU interpreter's folder {path} holds {secret}, which the candidate "
                    "must not see; use an interpreter installed elsewhere (--gpu-python)"
                )
        chosen.append(str(path))
    # a folder inside another chosen one is bound with it
    return sorted(p for p in chosen if not any(Path(o) in Path(p).parents for o in chosen))


def cpu_stand_ins(count: int = 1) -> list[Gpu]:
    """Devices of the CPU stand-in (`--gpu-fake-cpu`): the protocol without a GPU (tests)."""
    return [Gpu(i, "CPU stand-in", f"cpu-{i}", (), "cpu") for i in range(count)]
