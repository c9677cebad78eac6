"""The preflight's table: one `CheckResult` a row, collected in a `PreflightReport`.

A row is ready or missing, with one line of detail and, when missing, how to fix it. The report
is ready only when every row is; it renders as a rich table (coloured on a terminal, plain ASCII
in logs) and names the missing rows in one line for stderr. Pure values: no checks run here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

#: The width of the table where the output is not a terminal (a log file, a pipe).
LOG_WIDTH = 200


@dataclass(frozen=True)
class CheckResult:
    """One row of the preflight table. `fix` is empty when the check is ready. `usage` is the
    OpenAI `usage` of the real model call the check made (None: no call, or no usage given):
    the run counts it in its cost."""

    name: str
    ready: bool
    detail: str
    fix: str = ""
    usage: dict[str, Any] | None = None

    def line(self) -> str:
        """The row in one line: ``name: detail — fix`` (the fix only when missing)."""
        return f"{self.name}: {self.detail}" + (f" — {self.fix}" if self.fix else "")


def ready_check(name: str, detail: str, usage: dict[str, Any] | None = None) -> CheckResult:
    """A ready row: `detail` says what was found; `usage`, what its model call used."""
    return CheckResult(name, True, detail, usage=usage)


def missing_check(name: str, detail: str, fix: str) -> CheckResult:
    """A missing row: `detail` says what is wrong, `fix` what the user changes to make it ready."""
    return CheckResult(name, False, detail, fix)


@dataclass(frozen=True)
class PreflightReport:
    """All check results in table order; `ok` only when every check is ready."""

    checks: tuple[CheckResult, ...]

    @property
    def ok(self) -> bool:
        return all(check.ready for check in self.checks)

    @property
    def missing(self) -> tuple[CheckResult, ...]:
        return tuple(check for check in self.checks if not check.ready)

    def table(self, *, ascii_only: bool = False) -> Table:
        """The report as a rich table; `ascii_only` draws it with plain ASCII for logs."""
        table = Table(title="Guidance-TTT preflight", box=box.ASCII if ascii_only else box.ROUNDED)
        table.add_column("check", no_wrap=True)
        table.add_column("status", no_wrap=True)
        # Paths break at spaces only where they can; the text columns share the rest.
        table.add_column("detail", overflow="fold", ratio=3)
        table.add_column("how to fix", overflow="fold", ratio=2)
        for check in self.checks:
            status = Text("ready", "green") if check.ready else Text("missing", "bold red")
            table.add_row(Text(check.name), status, Text(check.detail), Text(check.fix or ""))
        return table

    def render(self, console: Console) -> None:
        """Print the table: coloured on a terminal, plain ASCII text otherwise (`LOG_WIDTH`
        wide, so no path of a row is broken mid-word in a log). Where a path or another word
        of a row is wider than its column would be, the rows are printed one after another
        instead, each line whole (the terminal wraps it, never inside a word)."""
        terminal = console.is_terminal
        out = console if terminal else Console(file=console.file, width=LOG_WIDTH, no_color=True)
        if self._fits(out.width):
            out.print(self.table(ascii_only=not terminal))
            return
        out.print(Text("Guidance-TTT preflight", style="bold"))
        for check in self.checks:
            status = Text("ready", "green") if check.ready else Text("missing", "bold red")
            out.print(Text.assemble(f"{check.name}: ", status), soft_wrap=True)
            out.print(Text(f"  {check.detail}"), soft_wrap=True)
            if check.fix:
                out.print(Text(f"  how to fix: {check.fix}"), soft_wrap=True)

    def _fits(self, width: int) -> bool:
        """Whether every word of the detail and fix columns fits the width they would get."""
        name = max((len(c.name) for c in self.checks), default=5)
        free = max(0, width - max(name, 5) - len("missing") - 13)  # borders and padding
        columns = ((lambda c: c.detail, free * 3 // 5), (lambda c: c.fix, free * 2 // 5))
        return all(
            len(word) <= room
            for check in self.checks
            for text, room in columns
            for word in (text(check) or "").split()
        )

    def failure_message(self) -> str:
        """One line naming every missing check, for the end of a failed run, then each missing
        row in one line (`CheckResult.line`: what is wrong and the setting to change)."""
        names = ", ".join(check.name for check in self.missing)
        head = f"preflight failed: missing {names} (see the table above for how to fix each)"
        return "\n".join([head, *(check.line() for check in self.missing)])
