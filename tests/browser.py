"""A real headless browser for the tests of `guidance-ttt browse`: Debian's Chromium driven by
Playwright (the `watch` extra; never `playwright install`, the system's Chromium is used).
`chromium_or_skip()` skips with the reason when either is missing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


def chromium_path() -> str | None:
    """The system Chromium (scripts/system-packages.sh installs Debian's `chromium`)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromium_or_skip() -> str:
    path = chromium_path()
    if path is None:
        pytest.skip("no chromium on PATH: run scripts/system-packages.sh (Debian's chromium)")
    pytest.importorskip("playwright", reason="the watch extra (pip install -e '.[watch]')")
    return path


@dataclass
class Browser:
    page: Any
    problems: list[str] = field(default_factory=list)  # console errors and warnings, page errors

    def open(self, path: Path, *, timeout_ms: int = 30_000) -> None:
        """Open a page file and wait until its script has drawn everything."""
        self.page.goto(Path(path).resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", state="attached", timeout=timeout_ms)


@contextmanager
def browser(executable: str, *, width: int = 1400, height: int = 900) -> Iterator[Browser]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = chromium.new_page(viewport={"width": width, "height": height})
            found = Browser(page)
            page.on(
                "console",
                lambda m: (
                    found.problems.append(f"{m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: found.problems.append(f"page error: {e}"))
            yield found
        finally:
            chromium.close()
