"""Archive persistence cost: the reference scheme versus ours, on a realistic run.

Simulates STEPS steps x G*R rollouts with realistic entries (~40 KB of JSON each: program,
prompts, executor text) and reports, for both schemes, total bytes written, wall time, the
per-rollout cost at the first and the last step, and bytes written / bytes stored.

(a) reference: after every rollout the whole archive is rewritten as library.json
    (`json.dumps(indent=2, sort_keys=True)`, temp file + rename, no fsync, as the reference
    does). Its bytes are computed exactly for every rollout; its time is measured on a sample
    of real rewrites (whose sizes are checked against the exact count) and extrapolated
    linearly in the bytes, because rewriting ~300 GB would take hours. `--ref-full` measures
    every rewrite instead.
(b) ours as a run does it: `harness.storage.store.ArchiveStore` (fsynced journal line per rollout,
one
    commit per step) plus, after every commit, the atomic export of the committed archive as
    `committed-library.json` (the Discover layout,
    `harness.storage.library_json.write_library_json`);
    measured fully; bytes are counted where they are written (`harness.storage.atomic.METER`).
(c) ours without the per-step export: the same run with the export's bytes and time left out
    (they are metered separately, so (c) is exact, not a second run).

Written / stored counts what ends on disk: (a) library.json, (b) the store plus
committed-library.json, (c) the store.

Run: python benchmarks/archive_io.py            (about 2-3 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.library import Archive
from harness.state import (
    GUIDANCE_FORMAT_ERROR,
    INVALID,
    VALID,
    ArchiveConfig,
    LibraryEntry,
    LibraryNode,
)
from harness.storage import atomic
from harness.storage.library_json import (
    from_library_dict,
    library_json_bytes,
    to_library_dict,
    write_library_json,
)
from harness.storage.store import ArchiveStore

WORDS = [
    "for",
    "int",
    "auto",
    "const",
    "return",
    "if",
    "else",
    "while",
    "place",
    "piece",
    "grid",
    "width",
    "height",
    "best",
    "score",
    "cell",
    "rotate",
    "flip",
    "skyline",
    "shelf",
    "beam",
    "search",
    "restart",
    "anneal",
    "bound",
    "area",
    "density",
    "row",
    "column",
    "fit",
    "candidate",
    "orientation",
    "lookahead",
    "gap",
    "vector",
    "push_back",
    "size",
    "std::vector",
    "index",
    "offset",
]


def text_pool(rng: random.Random, size: int = 1 << 20) -> str:
    """A megabyte of code-like text to cut entry fields from."""
    out, length = [], 0
    while length < size:
        line = " ".join(rng.choices(WORDS, k=rng.randint(4, 12))) + ";\n"
        out.append(line)
        length += len(line)
    return "".join(out)


def cut(pool: str, rng: random.Random, n: int) -> str:
    start = rng.randrange(len(pool) - n)
    return pool[start : start + n]


def make_entry(
    pool: str, rng: random.Random, parent: LibraryNode, step: int, group: int, slot: int
) -> LibraryEntry:
    """A rollout entry shaped like a real one (~40 KB as JSON)."""
    roll = rng.random()
    status = VALID if roll < 0.6 else (INVALID if roll < 0.85 else GUIDANCE_FORMAT_ERROR)
    failed_guidance = status == GUIDANCE_FORMAT_ERROR
    raw = round(rng.uniform(40, 90), 4) if status == VALID else None
    summary = cut(pool, rng, 800)
    return LibraryEntry(
        id=f"{step:03d}-{group:02d}-{slot:02d}-{rng.getrandbits(64):016x}",
        parent_id=parent.id,
        problem_id="polyomino_packing",
        timestep=step + 1,
        guidance="" if failed_guidance else cut(pool, rng, 1500),
        execution_thinking="" if failed_guidance else cut(pool, rng, 4000),
        solution="" if failed_guidance else f"// {step}/{group}/{slot}\n" + cut(pool, rng, 16000),
        verifier_reward=raw / 100 if raw is not None else 0.0,
        verifier_raw_score=raw,
        verifier_status=status,
        verifier_message="70/70 cases" if raw else "wrong answer on case 3",
        summary=summary,
        reusable_idea=summary,
        failure_mode=None if status == VALID else status,
        metadata={
            "group_uid": f"{step + 1}:{group}",
            "selected_node_id": parent.id,
            "guidance_prompt": {"system": cut(pool, rng, 600), "user": cut(pool, rng, 6500)},
            "raw_guidance_text": cut(pool, rng, 2000),
            "execution_text": "" if failed_guidance else cut(pool, rng, 12000),
            "raw_model_summary": summary,
        },
    )


@dataclass
class StepCost:
    bytes: int = 0  # everything written for this step's rollouts and its commit
    seconds: float = 0.0
    payload: int = 0  # the step's entries as compact JSON: the data itself
    commit_bytes: int = 0  # ours: the step commit (groups line + head)
    export_bytes: int = 0  # ours: the step's committed-library.json export
    export_seconds: float = 0.0
    rollout_seconds: list[float] = field(default_factory=list)  # ours: each record_rollout
    write_seconds: list[float] = field(default_factory=list)  # ours: its write + fsync part


@dataclass
class Result:
    per_step: list[StepCost] = field(default_factory=list)
    stored: int = 0
    note: str = ""
    setup_bytes: int = 0  # writing the initial archive

    @property
    def total_bytes(self) -> int:
        return self.setup_bytes + sum(s.bytes for s in self.per_step)

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self.per_step)


def reference_rewrite(path: Path, archive: Archive) -> int:
    """One reference save: serialise everything, write a temp file, rename (no fsync)."""
    data = library_json_bytes(archive)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    temp.replace(path)
    return len(data)


class ExactSize:
    """The exact byte length of the reference library.json after each rollout, without
    serialising every entry again: entries are immutable, so each entry's text is measured once,
    and the rest of the document is dumped with one-byte placeholders in place of the entries."""

    def __init__(self) -> None:
        self.entry_bytes: dict[str, int] = {}

    def __call__(self, archive: Archive) -> int:
        for entry_id, entry in archive.entries.items():
            if entry_id not in self.entry_bytes:
                text = json.dumps(entry.to_dict(), indent=2, sort_keys=True)
                # the entry sits two levels deep: every line gains four spaces of indent
                self.entry_bytes[entry_id] = len(text) + 4 * text.count("\n")
        doc = to_library_dict(archive)
        doc["entries"] = dict.fromkeys(doc["entries"], 0)
        skeleton = len(json.dumps(doc, indent=2, sort_keys=True))
        return skeleton - len(doc["entries"]) + sum(self.entry_bytes.values())


def seed_archive(config: ArchiveConfig, pool: str, rng: random.Random) -> Archive:
    placeholder = LibraryNode("seed", "polyomino_packing", 0, None, 0.0, None, 0, None)
    seed = replace(
        make_entry(pool, rng, placeholder, -1, 0, 0),
        verifier_status=VALID,
        verifier_raw_score=40.0,
        failure_mode=None,
        solution="int main() { return 0; }",
    )
    return Archive.from_seed(config, seed)


def run_ours(
    args: argparse.Namespace, work: Path, archive: Archive, pool: str, rng: random.Random
) -> tuple[Result, list[tuple[int, int, LibraryEntry]]]:
    """Phase (b): the real store, measured alone. Returns the rollouts it made, in order."""
    ours, made = Result(note="measured"), []
    atomic.METER.reset()
    store = ArchiveStore.create(work / "ours", archive)
    ours.setup_bytes = atomic.METER.bytes_written
    for step in range(args.steps):
        mine = StepCost()
        for group, parent in enumerate(archive.select_parents(step)):
            for slot in range(args.rollouts):
                entry = make_entry(pool, rng, parent, step, group, slot)
                made.append((step, group, entry))
                before, io_before = atomic.METER.bytes_written, atomic.METER.seconds
                t0 = time.perf_counter()
                store.record_rollout(archive, step, group, slot, entry)
                mine.rollout_seconds.append(time.perf_counter() - t0)
                mine.write_seconds.append(atomic.METER.seconds - io_before)
                mine.seconds += mine.rollout_seconds[-1]
                mine.bytes += atomic.METER.bytes_written - before
                mine.payload += len(json.dumps(entry.to_dict(), separators=(",", ":")).encode())
        before, t0 = atomic.METER.bytes_written, time.perf_counter()
        store.commit_step(archive, step)
        mine.seconds += time.perf_counter() - t0
        mine.commit_bytes = atomic.METER.bytes_written - before
        mine.bytes += mine.commit_bytes
        before, t0 = atomic.METER.bytes_written, time.perf_counter()
        write_library_json(archive, work / "committed-library.json")
        mine.export_seconds = time.perf_counter() - t0
        mine.export_bytes = atomic.METER.bytes_written - before
        mine.seconds += mine.export_seconds
        mine.bytes += mine.export_bytes
        ours.per_step.append(mine)
        print(f"  (b) ours      step {step + 1:2d}/{args.steps}")
    store.close()
    ours.stored = sum(p.stat().st_size for p in (work / "ours").iterdir())
    ours.stored += (work / "committed-library.json").stat().st_size
    return ours, made


def without_export(ours: Result, work: Path) -> Result:
    """(c): the same run with the per-step export's bytes, time and file left out."""
    steps = [
        replace(
            s,
            bytes=s.bytes - s.export_bytes,
            seconds=s.seconds - s.export_seconds,
            export_bytes=0,
            export_seconds=0.0,
        )
        for s in ours.per_step
    ]
    stored = ours.stored - (work / "committed-library.json").stat().st_size
    return Result(steps, stored, ours.note, ours.setup_bytes)


def run_reference(
    args: argparse.Namespace,
    work: Path,
    archive: Archive,
    made: list[tuple[int, int, LibraryEntry]],
    ours: Result,
) -> Result:
    """Phase (a): the same rollouts on a copy of the same initial archive, rewriting the whole
    library.json after each one (exact sizes always; real rewrites on samples or all)."""
    per_step = args.groups * args.rollouts
    sample_at = {0, len(made) - 1} | {s * per_step + per_step // 2 for s in range(0, args.steps, 3)}
    ref, exact, samples = Result(), ExactSize(), []
    ref.setup_bytes = exact(archive)
    path = work / "reference" / "library.json"
    path.parent.mkdir()
    for index, (step, group, entry) in enumerate(made):
        if index % per_step == 0:
            archive.select_parents(step)
            ref.per_step.append(StepCost(payload=ours.per_step[step].payload))
        archive.submit(step, group, entry)
        size = exact(archive)
        ref.per_step[-1].bytes += size
        if args.ref_full or index in sample_at:
            t0 = time.perf_counter()
            written = reference_rewrite(path, archive)
            elapsed = time.perf_counter() - t0
            assert written == size, f"exact size {size} != written {written}"
            samples.append((size, elapsed))
            ref.per_step[-1].seconds += elapsed
        if index % per_step == per_step - 1:
            print(f"  (a) reference step {step + 1:2d}/{args.steps}: {size / 1e6:7.1f} MB")
    ref.stored = path.stat().st_size
    if not args.ref_full:  # time = a + b * bytes, fitted on the measured rewrites
        n = len(samples)
        mean_x = sum(x for x, _ in samples) / n
        mean_y = sum(y for _, y in samples) / n
        var = sum((x - mean_x) ** 2 for x, _ in samples)
        slope = sum((x - mean_x) * (y - mean_y) for x, y in samples) / var
        intercept = max(mean_y - slope * mean_x, 0.0)
        for cost in ref.per_step:
            cost.seconds = intercept * per_step + slope * cost.bytes
        ref.note = (
            f"extrapolated from {n} measured rewrites ({slope * 1e9:.2f} s/GB + "
            f"{intercept * 1e3:.0f} ms each)\n    measured rewrites: "
            + ", ".join(f"{human(x)} {y:.2f} s" for x, y in samples)
        )
    else:
        ref.note = "measured"
    return ref


def run(args: argparse.Namespace, work: Path) -> tuple[Result, Result, Result, dict[str, float]]:
    """Both schemes on identical rollouts: ours first (measured alone), then the reference on
    a copy of the same initial archive, so neither disturbs the other's timings."""
    config = ArchiveConfig(rollout_n=args.rollouts, groups_per_batch=args.groups)
    rng = random.Random(7)
    pool = text_pool(rng)
    archive = seed_archive(config, pool, rng)
    initial = to_library_dict(archive)
    ours, made = run_ours(args, work, archive, pool, rng)

    t0 = time.perf_counter()
    with ArchiveStore.open(work / "ours", config) as reopened:
        reopened.load()
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        reopened.export_library_json(work / "export.json")
        export_s = time.perf_counter() - t0

    ref = run_reference(args, work, from_library_dict(initial), made, ours)
    # the exchange file exported from our store is the reference scheme's final library.json
    final = (work / "reference" / "library.json").read_bytes()
    assert (work / "export.json").read_bytes() == final
    assert (work / "committed-library.json").read_bytes() == final
    return ref, ours, without_export(ours, work), {"load_s": load_s, "export_s": export_s}


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1000
    return f"{n:.1f} TB"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def report(
    args: argparse.Namespace, ref: Result, ours: Result, bare: Result, extra: dict[str, float]
) -> None:
    per_step = args.groups * args.rollouts
    schemes = (ref, ours, bare)

    def row(name: str, cell) -> tuple[str, ...]:
        return (name, *(cell(scheme, i) for i, scheme in enumerate(schemes)))

    rows = [
        row("total bytes written", lambda r, i: human(r.total_bytes)),
        row("bytes stored at the end", lambda r, i: human(r.stored)),
        row(
            "written / stored (bytes written per byte stored)",
            lambda r, i: f"{r.total_bytes / r.stored:.{1 if i == 0 else 3}f}x",
        ),
        row("wall time (persistence + archive updates)", lambda r, i: duration(r.total_seconds)),
    ]
    for index, step_no in ((0, 1), (-1, args.steps)):
        rows.append(
            row(
                f"per-rollout bytes, step {step_no}",
                lambda r, i, index=index: human(r.per_step[index].bytes / per_step),
            )
        )
        rows.append(
            row(
                f"per-rollout write+fsync time, step {step_no}",
                lambda r, i, index=index: (
                    f"{r.per_step[index].seconds / per_step * 1e3:.1f} ms"
                    if i == 0
                    else f"{statistics.median(r.per_step[index].write_seconds) * 1e3:.2f} ms med"
                ),
            )
        )
        step = ours.per_step[index]
        pairs = zip(step.rollout_seconds, step.write_seconds, strict=True)
        in_memory = statistics.median([total - io for total, io in pairs]) * 1e3
        rows.append(
            row(
                f"per-rollout archive update, step {step_no}",
                lambda r, i, v=in_memory: "(not measured)" if i == 0 else f"{v:.2f} ms med",
            )
        )
    rows.append(
        row(
            f"bytes written per entry byte, step 1 -> {args.steps}",
            lambda r, i: (
                f"{r.per_step[0].bytes / r.per_step[0].payload:.{1 if i == 0 else 3}f} -> "
                f"{r.per_step[-1].bytes / r.per_step[-1].payload:.{1 if i == 0 else 3}f}"
            ),
        )
    )
    rows.append(
        row(
            f"step commit bytes, step 1 -> {args.steps}",
            lambda r, i: (
                "-"
                if i == 0
                else f"{human(r.per_step[0].commit_bytes)} -> {human(r.per_step[-1].commit_bytes)}"
            ),
        )
    )
    rows.append(
        row(
            f"per-step export, step 1 -> {args.steps}",
            lambda r, i: (
                "-"
                if i != 1
                else f"{human(r.per_step[0].export_bytes)} {r.per_step[0].export_seconds:.2f} s"
                f" -> {human(r.per_step[-1].export_bytes)} {r.per_step[-1].export_seconds:.2f} s"
            ),
        )
    )
    width = max(len(r[0]) for r in rows) + 2
    heads = ("(a) reference", "(b) ours + export", "(c) ours, no export")
    cells = [max(len(heads[i - 1]), *(len(r[i]) for r in rows)) + 3 for i in (1, 2, 3)]
    print()
    print(
        f"Archive I/O: {args.steps} steps x {per_step} rollouts (G={args.groups}, "
        f"R={args.rollouts}), entries ~{human(bare.stored / (per_step * args.steps + 1))} each"
    )
    print(f"{'':{width}}" + "".join(f"{h:>{c}}" for h, c in zip(heads, cells, strict=True)))
    for name, *values in rows:
        print(f"{name:{width}}" + "".join(f"{v:>{c}}" for v, c in zip(values, cells, strict=True)))
    print("(a) rewrites library.json after every rollout; (b) journal + per-step commit + atomic")
    print("    committed-library.json after every commit; (c) = (b) without the export")
    print("(a) bytes: exact for every rollout (checked against the measured rewrites)")
    print(f"(a) time: {ref.note}")
    print(f"(b), (c) time: {ours.note}, fsync per journal line, commit and export")
    print("    fsync latency varies with other disk activity on the machine; bytes are exact")
    print(
        f"(b) resume load of the whole store: {extra['load_s']:.1f} s; "
        f"library.json export on demand: {extra['export_s']:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--ref-full", action="store_true", help="time every reference rewrite")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: tmp)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="archive-io-", dir=args.dir))
    try:
        print(f"work directory {work} ({os.uname().sysname}, {os.cpu_count()} cpus)")
        ref, ours, bare, extra = run(args, work)
        report(args, ref, ours, bare, extra)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
