"""How fast `guidance-ttt browse` opens a full run: a synthetic 30 × 128 archive (3,840 rollouts
and the 8 seed roots, built through the real `Archive`, programs of ~160 lines each edited from
its parent's; `tests/synthetic_run.py`), written as a page and opened in headless Chromium.

It reports the page's size, the time to write it, and in the browser (median of `--loads`):
the time from navigation to the page's ready mark (data parsed, 3,848 nodes and their edges
drawn, filters applied), to show a selected node with its diff, and to apply a filter.

Run: python benchmarks/browse_load.py [--steps 30 --groups 8 --rollouts 16] [--loads 3]
     [--screenshot docs/images/browse.png]        (needs chromium and playwright)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness.cli.browse import write_page  # noqa: E402
from tests.synthetic_run import write_synthetic_run  # noqa: E402


def save_screenshot(page: Any, path: Path) -> None:
    """A small PNG of the page (128 colours: the docs carry it)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    image = Image.open(path).convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
    image.save(path, optimize=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--loads", type=int, default=3, help="page loads to time (median)")
    parser.add_argument("--screenshot", type=Path, help="save a screenshot of a selected node")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("no chromium on PATH: run scripts/system-packages.sh")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        started = time.perf_counter()
        library = write_synthetic_run(
            work / "run", steps=args.steps, groups=args.groups, rollouts=args.rollouts
        )
        built = time.perf_counter() - started
        page_file = work / "run.html"
        started = time.perf_counter()
        nodes = write_page(
            library,
            page_file,
            title=f"synthetic {args.steps} × {args.groups * args.rollouts} run",
            every=None,
            source_label="library.json (tests/synthetic_run.py)",
        )
        written = time.perf_counter() - started
        loads, selects, filters = [], [], []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            for _ in range(args.loads):
                page = browser.new_page(viewport={"width": 1280, "height": 800})
                started = time.perf_counter()
                page.goto(page_file.as_uri())
                page.wait_for_selector("body[data-ready='1']", state="attached", timeout=60_000)
                loads.append(time.perf_counter() - started)
                target = page.locator("circle.node:not(.failed)").nth(nodes // 2)
                started = time.perf_counter()
                target.click(force=True)
                page.wait_for_selector("#detail pre.diff", timeout=10_000)
                selects.append(time.perf_counter() - started)
                started = time.perf_counter()
                page.select_option("#status", "valid")
                page.wait_for_function(
                    "document.querySelector('#count').textContent.startsWith('showing') && "
                    "document.querySelectorAll('circle.node.failed.hidden').length > 0"
                )
                filters.append(time.perf_counter() - started)
                if args.screenshot is not None and len(loads) == args.loads:
                    page.select_option("#status", "all")
                    target.click(force=True)
                    save_screenshot(page, args.screenshot)
                page.close()
            version = browser.version
            browser.close()
        size = page_file.stat().st_size
    print(
        f"archive: {args.steps} steps × {args.groups}×{args.rollouts}, {nodes} nodes "
        f"(built in {built:.1f} s)"
    )
    print(f"page: {size / 1e6:.1f} MB, written in {written:.2f} s")
    print(f"Chromium {version}, median of {args.loads} loads:")
    print(
        f"  open to ready        {statistics.median(loads):.2f} s  (all: "
        + ", ".join(f"{x:.2f}" for x in loads)
        + ")"
    )
    print(f"  select node + diff   {statistics.median(selects) * 1000:.0f} ms")
    print(f"  filter (valid only)  {statistics.median(filters) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
