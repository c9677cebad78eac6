"""The preflight's table: one `CheckResult` a row, collected in a `PreflightReport`.

A row is ready or missing, with one line of detail and, when missing, how to fix it. The report
is ready only when every row is; it renders as a rich table (coloured on a terminal, plain ASCII
in logs) and names the missing rows in one line for stderr. Pure values: no checks run here.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table


@dataclass(frozen=True)
class CheckResult:
    """One row of the preflight table. `fix` is empty when the check is ready."""

    name: str
    ready: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        """The row in one line: ``name: detail — fix`` (the fix only when missing)."""
        return f"{self.name}: {self.detail}" + (f" — {self.fix}" if self.fix else "")


def ready_check(name: str, detail: str) -> CheckResult:
    """A ready row: `detail` says what was found."""
    return CheckResult(name, True, detail)


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
        for column in ("check", "status", "detail", "how to fix"):
            table.add_column(column, overflow="fold")
        for check in self.checks:
            status = "[green]ready[/]" if check.ready else "[bold red]missing[/]"
            table.add_row(check.name, status, check.detail, check.fix)
        return table

    def render(self, console: Console) -> None:
        """Print the table: coloured on a terminal, plain ASCII text otherwise."""
        console.print(self.table(ascii_only=not console.is_terminal))

    def failure_message(self) -> str:
        """One line naming every missing check, for the end of a failed run, then each missing
        row in one line (`CheckResult.line`: what is wrong and the setting to change)."""
        names = ", ".join(check.name for check in self.missing)
        head = f"preflight failed: missing {names} (see the table above for how to fix each)"
        return "\n".join([head, *(check.line() for check in self.missing)])
