"""`guidance-ttt show STATE ENTRY [--code] [--diff-parent] [--prompts] [--raw]`: one rollout.

ENTRY is an entry id or a node id, or a unique prefix of one (as `inspect` prints them). Shown:
the step, slot and verdict, the parent and its score, the guidance, the executor's summary, the
per-case ratios; `--code` the program, `--diff-parent` a unified diff against the parent's
program, `--prompts` the prompts both models saw (the guidance prompt as the entry keeps it;
the executor's rebuilt from the task, the parent and the guidance with `harness.prompts`, the
function the run used), `--raw` the guidance model's and the executor's answers as received
(what a `parse_error` needs; each bounded to `RAW_LIMIT` characters). Everything a model or a
candidate wrote is shown escaped (`harness.observe.terminal`). Reads only the state directory
(and the task, for `--prompts`).
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from rich.console import Console
from rich.text import Text

from harness import results
from harness.library import Archive
from harness.observe.terminal import bounded, escape_terminal
from harness.state import LibraryEntry

#: The most of one raw answer `--raw` prints (an answer can be a whole model context long).
RAW_LIMIT = 20_000


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    show = subparsers.add_parser(
        "show",
        help="one rollout in full: guidance, summary, verdict per case, program, diff, prompts",
        description=__doc__.splitlines()[0],
    )
    add_arguments(show)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `show` subcommand's flags."""
    parser.add_argument("state_dir", type=Path, help="the run's state directory")
    parser.add_argument("entry", help="an entry or node id, or a unique prefix of one")
    parser.add_argument("--code", action="store_true", help="print the program (default: off)")
    parser.add_argument(
        "--diff-parent",
        action="store_true",
        help="print a unified diff against the parent's program (default: off)",
    )
    parser.add_argument(
        "--prompts",
        action="store_true",
        help="print the prompts the guidance model and the executor saw (default: off)",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="print the guidance model's and the executor's answers as received, bounded and "
        f"escaped ({RAW_LIMIT:,} characters each; default: off)",
    )
    parser.add_argument(
        "--task", type=Path, help="the task, for --prompts (default: the run's recorded task)"
    )


def find_entry(archive: Archive, key: str) -> LibraryEntry:
    """The entry `key` names: an entry id, a node id, or a unique prefix of either. ValueError
    naming the candidates when it names none or several."""
    entries = archive.entries
    if key in entries:
        return entries[key]
    if key in archive.nodes:
        return archive.entry_of(key)
    matches = {e.id for e in entries.values() if e.id.startswith(key)}
    matches |= {n.entry_id for n in archive.nodes.values() if n.id.startswith(key)}
    if len(matches) == 1:
        return entries[matches.pop()]
    if not matches:
        raise ValueError(f"no entry or node {key!r} in the run; `guidance-ttt inspect` lists ids")
    shown = ", ".join(sorted(m[:12] for m in matches)[:5])
    raise ValueError(f"{key!r} names {len(matches)} entries ({shown}); give more characters")


def parent_of(archive: Archive, entry: LibraryEntry) -> LibraryEntry | None:
    """The entry the rollout expanded (its parent node's entry, else the one its metadata
    names)."""
    node = archive.nodes.get(entry.parent_id or "")
    if node is not None:
        return archive.entries.get(node.entry_id)
    return archive.entries.get(str(entry.metadata.get("selected_parent_entry_id")))


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    """Print the rollout; the run's task (`--task`, else its recorded settings') rebuilds the
    executor's prompt."""
    from harness.cli.flags import run_task

    console = console or Console()
    task_dir = args.task or run_task(args.state_dir)
    view = results.load_run(args.state_dir)
    archive = view.archive
    entry = find_entry(archive, args.entry)
    parent = parent_of(archive, entry)
    meta = entry.metadata
    score = "--" if entry.verifier_raw_score is None else f"{entry.verifier_raw_score:.4f}"
    where = (
        "the seed"
        if entry.timestep == 0
        else f"step {meta.get('step', entry.timestep - 1)}, group {meta.get('group', '?')}, "
        f"rollout {meta.get('rollout', '?')}"
    )
    lines = [
        f"entry {entry.id} ({where})",
        f"verdict: {entry.verifier_status}, score {score}: {entry.verifier_message}",
    ]
    if parent is not None:
        parent_score = parent.verifier_raw_score
        shown = "--" if parent_score is None else f"{parent_score:.4f}"
        lines.append(f"parent: entry {parent.id}, score {shown}")
    artifacts = meta.get("verification_artifacts") or {}
    ratios = artifacts.get("case_ratios")
    if ratios:
        lines.append("cases: " + "  ".join(f"{i}:{r:.4f}" for i, r in enumerate(ratios, 1)))
    metrics = artifacts.get("metrics")
    if isinstance(metrics, dict) and metrics:  # an evaluator task's metrics, the score's too
        lines.append("metrics: " + "  ".join(f"{k} {_metric(v)}" for k, v in metrics.items()))
    if not entry.is_valid and artifacts.get("case_detail"):
        lines.append(f"detail: {artifacts['case_detail']}")
    for line in lines:
        console.print(Text(escape_terminal(line, multiline=False)), soft_wrap=True)
    _section(console, "guidance", entry.guidance or "(none: the seed, or malformed guidance)")
    _section(console, "summary", entry.summary or "(none)")
    if args.code:
        _section(console, "program", entry.solution or "(no program)")
    if args.diff_parent:
        if parent is None:
            _section(console, "diff to the parent", "(the seed has no parent)")
        else:
            diff = difflib.unified_diff(
                (parent.solution or "").splitlines(keepends=True),
                (entry.solution or "").splitlines(keepends=True),
                fromfile=f"parent {parent.id[:8]}",
                tofile=f"entry {entry.id[:8]}",
            )
            _section(console, "diff to the parent", "".join(diff) or "(identical programs)")
    if args.prompts:
        prompt = meta.get("guidance_prompt") or {}
        for role in ("system", "user"):
            _section(console, f"guidance prompt ({role})", str(prompt.get(role, "(not kept)")))
        _executor_prompt(console, entry, parent, task_dir)
    if args.raw:
        for role, key in (("guidance model", "raw_guidance_text"), ("executor", "execution_text")):
            raw = meta.get(key)
            text = bounded(str(raw), RAW_LIMIT) if raw else "(none recorded: not called)"
            _section(console, f"{role}'s raw answer", text)
    return 0


def _executor_prompt(
    console: Console, entry: LibraryEntry, parent: LibraryEntry | None, task_dir: Path | None
) -> None:
    from harness.contract import load_contract, load_instruction
    from harness.prompts import executor_prompt

    if parent is None or not entry.guidance:
        _section(console, "executor prompt", "(none: the executor was not called)")
        return
    if task_dir is None:
        _section(console, "executor prompt", "(the task is not known: pass --task DIR)")
        return
    prompt = executor_prompt(
        load_contract(task_dir), load_instruction(task_dir), parent, entry.guidance
    )
    note = f"(rebuilt from {task_dir}, the parent and the guidance, as the run built it)"
    _section(console, f"executor prompt (system) {note}", prompt.system)
    _section(console, "executor prompt (user)", prompt.user)


def _metric(value: object) -> str:
    """A metric for display: a float to 6 significant digits, anything else as it is (cut)."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)[:80]


def _section(console: Console, title: str, body: str) -> None:
    console.print(Text(f"--- {title}", style="bold"))
    console.print(Text(escape_terminal(body.rstrip("\n"))), soft_wrap=True)
