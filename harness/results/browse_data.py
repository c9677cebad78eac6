"""The archive as the data of `guidance-ttt browse`'s page: one record per rollout (the seed
included), its parent, score, status, per-case ratios, guidance, summary, program (stored once
per distinct text) and PUCT statistics. Pure: it reads a `RunView` (or a bare archive) and
returns plain JSON values; the page (`harness/cli/browse_page.html`) renders them.

Only what a researcher reads goes in: no prompts sent to the models, no response metadata, no
settings, so no credential can reach the page.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from harness.archive.best import run_best
from harness.library import Archive
from harness.results.inspection import run_mode, run_suite
from harness.results.run_view import RunView
from harness.state import LibraryEntry, LibraryNode

#: Version of the page's data layout (the page refuses another).
FORMAT = 1


def browse_data(
    view: RunView | None = None,
    *,
    archive: Archive | None = None,
    title: str,
    source: str,
    refresh_s: float | None = None,
) -> dict[str, Any]:
    """The page's data for a run (`view`, its in-flight rollouts included) or for a bare
    `archive` (a library.json); `title` and `source` name it on the page; `refresh_s` makes
    the page reload itself (the file is rewritten that often)."""
    if view is not None:
        archive = view.archive
    assert archive is not None, "browse_data needs a RunView or an archive"
    in_flight = [entry for _, _, entry in view.in_flight] if view is not None else []
    entries = sorted(
        [*archive.entries.values(), *in_flight],
        key=lambda e: (e.timestep, _int(e.metadata.get("group")), _int(e.metadata.get("rollout"))),
    )
    committed_ids = set(archive.entries)
    index = {entry.id: i for i, entry in enumerate(entries)}
    node_of_entry = _nodes_by_entry(archive.nodes.values())
    programs: dict[str, int] = {}
    records = []
    for entry in entries:
        program = programs.setdefault(entry.solution, len(programs))
        records.append(
            _record(entry, index, archive, node_of_entry, program, entry.id not in committed_ids)
        )
    _best_children(records, archive.config.score_direction)
    best = run_best(archive)
    meta: dict[str, Any] = {
        "format": FORMAT,
        "title": title,
        "source": source,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "direction": archive.config.score_direction,
        "groups": archive.config.groups_per_batch,
        "rollouts": archive.config.rollout_n,
        "committed_step": view.committed_step if view is not None else archive.last_step(),
        "in_flight": len(in_flight),
        "best": index.get(best.id) if best is not None else None,
        "refresh_s": refresh_s,
    }
    if view is not None:
        meta.update(mode=run_mode(view), suite=run_suite(view))
    return {"meta": meta, "nodes": records, "programs": list(programs)}


def _record(
    entry: LibraryEntry,
    index: Mapping[str, int],
    archive: Archive,
    node_of_entry: Mapping[str, LibraryNode],
    program: int,
    in_flight: bool,
) -> dict[str, Any]:
    meta = entry.metadata
    artifacts = meta.get("verification_artifacts")
    ratios = artifacts.get("case_ratios") if isinstance(artifacts, Mapping) else None
    node = node_of_entry.get(entry.id)
    record: dict[str, Any] = {
        "id": entry.id,
        "step": entry.timestep - 1,  # the seed is step -1
        "g": _int(meta.get("group")),
        "r": _int(meta.get("rollout")),
        "parent": _parent_index(entry, index, archive),
        "score": entry.verifier_raw_score,
        "reward": entry.verifier_reward,
        "status": entry.verifier_status,
        "message": entry.verifier_message,
        "cases": [float(r) for r in ratios] if isinstance(ratios, list) else None,
        "guidance": str(meta.get("raw_guidance_text") or entry.guidance),
        "summary": entry.summary,
        "answer": _answer(entry),
        "program": program,
        "receipt": str(meta.get("agent_record_id") or ""),
        "in_flight": in_flight,
    }
    if node is not None:
        record["puct"] = {
            "node": node.id,
            "visits": node.visits,
            "n": archive.puct_n.get(node.id),
            "value": node.value,
            "best_child_value": archive.puct_m.get(node.id),
        }
    return record


#: The most of one executor answer the page holds.
ANSWER_LIMIT = 20_000


def _answer(entry: LibraryEntry) -> str | None:
    """The executor's raw answer of a failed rollout, bounded (`ANSWER_LIMIT`); None for a
    valid one, whose answer is its program and summary, both shown."""
    text = entry.metadata.get("execution_text")
    if entry.is_valid or not isinstance(text, str) or not text:
        return None
    if len(text) <= ANSWER_LIMIT:
        return text
    return text[:ANSWER_LIMIT] + f"\n… ({len(text) - ANSWER_LIMIT:,} more characters not shown)"


def _parent_index(entry: LibraryEntry, index: Mapping[str, int], archive: Archive) -> int | None:
    """The record index of the entry a rollout started from; None for the seed (a root node's
    entry is the seed itself) and for a parent the archive does not hold."""
    if entry.timestep < 1:
        return None
    parent_entry = entry.metadata.get("selected_parent_entry_id")
    if not isinstance(parent_entry, str):
        node = archive.nodes.get(entry.parent_id or "")
        parent_entry = node.entry_id if node is not None else None
    parent = index.get(parent_entry) if parent_entry else None
    return None if parent is None or parent == index.get(entry.id) else parent


def _nodes_by_entry(nodes: Iterable[LibraryNode]) -> dict[str, LibraryNode]:
    """Each entry's archive node (a seed replicated into several roots: the most visited)."""
    out: dict[str, LibraryNode] = {}
    for node in nodes:
        if node.entry_id is None:
            continue
        held = out.get(node.entry_id)
        if held is None or node.visits > held.visits:
            out[node.entry_id] = node
    return out


def _best_children(records: list[dict[str, Any]], direction: str) -> None:
    """Give each record `best_child`: the index of its best-scoring valid child, if any."""
    sign = 1.0 if direction == "max" else -1.0
    best: dict[int, int] = {}
    for i, record in enumerate(records):
        parent, score = record["parent"], record["score"]
        if parent is None or score is None or record["status"] != "valid":
            continue
        held = best.get(parent)
        if held is None or sign * score > sign * records[held]["score"]:
            best[parent] = i
    for i, record in enumerate(records):
        record["best_child"] = best.get(i)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
