"""The judge's worker slots: an interactive case holds two of `--workers`, taken at once, in order.

Plain asyncio (no processes): holders are coroutines that record when they start and wait for
an event the test sets, so the order of events, not the clock, decides each assertion.
"""

from __future__ import annotations

import asyncio

import pytest

from judges.service.slots import WorkerSlots


async def holder(slots: WorkerSlots, count: int, name: str, log: list[str], go: asyncio.Event):
    async with slots.hold(count):
        log.append(name)
        await go.wait()


async def settle() -> None:
    for _ in range(5):  # let every ready coroutine run up to its next wait
        await asyncio.sleep(0)


def test_an_interactive_case_holds_two_slots_so_only_one_other_program_runs_beside_it() -> None:
    async def scenario() -> None:
        slots, log, go = WorkerSlots(3), [], asyncio.Event()
        tasks = [
            asyncio.create_task(holder(slots, 2, "interactive", log, go)),
            asyncio.create_task(holder(slots, 1, "case-a", log, go)),
            asyncio.create_task(holder(slots, 1, "case-b", log, go)),
        ]
        await settle()
        assert log == ["interactive", "case-a"] and slots.free == 0
        go.set()
        await asyncio.gather(*tasks)
        assert log == ["interactive", "case-a", "case-b"] and slots.free == 3

    asyncio.run(scenario())


def test_a_two_slot_holder_is_not_overtaken_by_later_one_slot_holders() -> None:
    async def scenario() -> None:
        slots, log = WorkerSlots(2), []
        first, rest = asyncio.Event(), asyncio.Event()
        running = asyncio.create_task(holder(slots, 1, "running", log, first))
        await settle()
        pair = asyncio.create_task(holder(slots, 2, "pair", log, rest))
        later = asyncio.create_task(holder(slots, 1, "later", log, rest))
        await settle()
        assert log == ["running"]  # one slot is free, but the pair came first and needs two
        first.set()
        await settle()
        assert log == ["running", "pair"]
        rest.set()
        await asyncio.gather(running, pair, later)
        assert log == ["running", "pair", "later"]

    asyncio.run(scenario())


def test_with_one_worker_an_interactive_case_takes_the_one_slot() -> None:
    async def scenario() -> None:
        slots, log, go = WorkerSlots(1), [], asyncio.Event()
        go.set()
        await holder(slots, 2, "interactive", log, go)
        assert log == ["interactive"] and slots.free == 1

    asyncio.run(scenario())


def test_a_waiter_cancelled_before_its_turn_leaves_no_slot_taken() -> None:
    async def scenario() -> None:
        slots, log, go = WorkerSlots(2), [], asyncio.Event()
        busy = asyncio.create_task(holder(slots, 2, "busy", log, go))
        await settle()
        waiting = asyncio.create_task(holder(slots, 1, "waiting", log, go))
        await settle()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        go.set()
        await busy
        assert slots.free == 2 and log == ["busy"]

    asyncio.run(scenario())


def test_zero_workers_is_refused() -> None:
    with pytest.raises(ValueError, match="workers must be at least 1, got 0"):
        WorkerSlots(0)
