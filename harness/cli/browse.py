"""`guidance-ttt browse RUN`: the archive as one page in any web browser.

RUN is a state directory (running or finished: the committed archive plus the in-flight step's
journaled rollouts), a `library.json` file (`committed-library.json`, or one exported or copied
anywhere), or a directory holding one of those. The page is written as a single self-contained
HTML file (`-o`, default `<name>-browse.html` here): the data, the styles and the script are
inside it, it loads nothing (its Content-Security-Policy forbids every fetch), so it opens
offline, from a mail attachment or a copied results directory, and needs no process running.
With `--every SECONDS` the command keeps rewriting the file (atomically) and the page reloads
itself at that interval, keeping the selected node and the filters: the view of a running run.

Why a file, not a loopback server: a 30 × 128 archive with its programs is a few MB, which a
browser parses in well under a second; a file can be shared and archived with the results, has
no port to guard, and is read-only by construction. The page (`browse_page.html` and
`browse_page.js` beside this module) puts every candidate-controlled text in with
`textContent`; the data sits in a JSON block with `<`, `>` and `&` escaped, and only the one
script whose hash the policy names can run.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import html
import json
import sys
import time
from pathlib import Path
from typing import Any

from harness import results
from harness.observe.terminal import escape_terminal
from harness.results.browse_data import browse_data
from harness.storage.atomic import atomic_write_bytes
from harness.storage.library_json import read_library_json
from harness.storage.run_files import COMMITTED_LIBRARY

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "browse_page.html"
SCRIPT = HERE / "browse_page.js"
LIBRARY_NAMES = ("library.json", COMMITTED_LIBRARY.name)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "browse",
        help="the archive as a self-contained HTML page (tree, diffs)",
        description="Write the archive as a self-contained HTML page: the search tree, and for "
        "each rollout its score, verdict, guidance, summary, program and diff against its "
        "parent, Reef receipt and PUCT statistics. Opens offline in any browser.",
    )
    parser.add_argument(
        "run", type=Path, help="a state directory, a library.json, or a directory holding one"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="the HTML file to write (default: <name>-browse.html in the current directory)",
    )
    parser.add_argument(
        "--every",
        type=float,
        metavar="SECONDS",
        help="keep rewriting the file this often, and let the page reload itself (default: "
        "write once)",
    )
    parser.add_argument("--title", help="the page's title (default: the run directory's name)")


def load_source(run: Path) -> tuple[results.RunView | None, Any, Path]:
    """(view, archive, what was read) for RUN: a state directory's `RunView`, or the archive of
    a `library.json`. Raises `RunNotFound` naming what was looked for."""
    run = Path(run)
    if run.is_file():
        return None, read_library_json(run), run
    if results.find_store(run) is not None or (run / COMMITTED_LIBRARY).exists():
        view = results.load_run(run)
        return view, view.archive, view.archive_source
    for name in LIBRARY_NAMES:
        if (run / name).is_file():
            return None, read_library_json(run / name), run / name
    exported = sorted((run / results.EXPORTED_ARCHIVES).glob("*.library.json"))
    if len(exported) == 1:
        return None, read_library_json(exported[0]), exported[0]
    if exported:
        names = ", ".join(path.name for path in exported)
        raise results.RunNotFound(
            f"{run} is an export of {len(exported)} runs ({names}): pass one of "
            f"{run / results.EXPORTED_ARCHIVES}/<run>.library.json"
        )
    raise results.RunNotFound(
        f"{run} holds no run and no library.json: pass a state directory (e.g. work/<task>), "
        "a library.json file, or a directory holding one"
    )


def render_page(data: dict[str, Any]) -> str:
    """The page: the template with its script, the script's CSP hash and the data filled in."""
    script = SCRIPT.read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    page = TEMPLATE.read_text(encoding="utf-8")
    page = page.replace("__SCRIPT_HASH__", f"sha256-{digest}")
    page = page.replace("__TITLE__", html.escape(str(data["meta"]["title"])))
    page = page.replace("__SCRIPT__", script)
    return page.replace("__DATA__", json_for_html(data))  # last: the data is never scanned again


def json_for_html(value: Any) -> str:
    """JSON that is inert inside a `<script type="application/json">` block: `<`, `>`, `&` and
    the two JavaScript line separators are written as escapes, so no text can end the block."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def write_page(
    run: Path,
    output: Path,
    *,
    title: str | None,
    every: float | None,
    source_label: str | None = None,
) -> int:
    """Write the page for RUN to `output` atomically; returns the number of rollouts in it.
    The page names what it was read from (`source_label`, default the path read)."""
    view, archive, source = load_source(run)
    name = title or (Path(run).resolve().name if Path(run).is_dir() else Path(run).stem)
    label = source_label or _shown(Path(run), Path(source))
    data = browse_data(view, archive=archive, title=name, source=label, refresh_s=every)
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(output, render_page(data).encode("utf-8"))
    return len(data["nodes"])


def _shown(run: Path, source: Path) -> str:
    """What the page says it was read from: the run directory's name and the path inside it
    (no absolute path of this machine in a page that may be shared)."""
    run = run.resolve()
    base = run if run.is_dir() else run.parent
    try:
        return str(Path(base.name) / source.resolve().relative_to(base))
    except ValueError:
        return source.name


def run(args: argparse.Namespace) -> int:
    prog = "guidance-ttt browse"
    if args.every is not None and args.every < 1:
        print(f"{prog}: --every {args.every} is too short; use 1 second or more", file=sys.stderr)
        return 2
    run = Path(args.run)
    default_name = (run.resolve().name if run.is_dir() else run.stem) + "-browse.html"
    output = args.output or Path(default_name)
    try:
        while True:
            count = write_page(run, output, title=args.title, every=args.every)
            shown = escape_terminal(output, multiline=False)
            print(f"wrote {shown} ({count} rollouts); open it in a browser", flush=True)
            if args.every is None:
                return 0
            time.sleep(args.every)
    except KeyboardInterrupt:
        return 0
    except (results.RunNotFound, ValueError, OSError) as exc:
        print(f"{prog}: {escape_terminal(exc, multiline=False)}", file=sys.stderr)
        return 2
