"""The judge's worker slots: at most `--workers` sandboxed programs run at once.

A compile, a checked case or a checker holds one slot; an interactive case holds two, since its
candidate and its interactor run at the same time (one slot when the judge has only one). A
holder of several slots takes them all at once or waits, in arrival order: two interactive
cases can never each hold half of what they need, and a case that needs two slots is not
overtaken forever by ones that need one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator


class WorkerSlots:
    """`workers` slots, taken `count` at a time in first-come order (asyncio, one event loop)."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self._free = workers
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def free(self) -> int:
        """Slots nobody holds now."""
        return self._free

    @contextlib.asynccontextmanager
    async def hold(self, count: int = 1) -> AsyncIterator[None]:
        """Hold `count` slots (at most all of them) for the body of the `async with`."""
        count = max(1, min(count, self.workers))
        await self._acquire(count)
        try:
            yield
        finally:
            self._free += count
            self._wake()

    async def _acquire(self, count: int) -> None:
        if not self._waiting and self._free >= count:
            self._free -= count
            return
        granted = asyncio.get_running_loop().create_future()
        entry = (count, granted)
        self._waiting.append(entry)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._free += count  # granted just as it was cancelled: give the slots back
            else:
                self._waiting.remove(entry)
            self._wake()
            raise

    def _wake(self) -> None:
        """Grant waiting holders in order while the first one's slots are free."""
        while self._waiting and self._free >= self._waiting[0][0]:
            count, granted = self._waiting.popleft()
            self._free -= count
            granted.set_result(None)
