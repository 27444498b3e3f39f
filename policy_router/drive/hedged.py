"""The hedged race, sync and async: a first attempt, a second one beside it once the first
is slow, and the first answer wins (see `policies.hedge`).

The drivers hand the race how to run one attempt (`run`: bounded by the deadline and the
route's own limits, raising what the attempt ended with) and how to tell the plan a
failure (`failed`: False for an error that is no provider outcome, which the race then
raises). The race asks the plan for the hedge (`Plan.hedge`, admitted like any attempt),
tells it which attempt lost (`Plan.lost`), and returns the winner; None when every attempt
failed, so the driver goes on to the next route.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from ..core.gate import Send
from ..core.plan import Plan
from ..state.store import Steps

__all__ = ["Decided", "arace", "race"]


class Decided(Exception):
    """A worker took a hedged attempt from the queue after the race was won by `winner`:
    not sent."""

    def __init__(self, winner: Send) -> None:
        super().__init__(f"the race was won by {winner.route.name}")
        self.winner = winner

T = TypeVar("T")


def race(
    plan: Plan,
    first: Send,
    run: Callable[[Send], T],
    after: float,
    pool: ThreadPoolExecutor,
    failed: Callable[[Send, Exception], bool],
    settle_loser: Callable[[Send, Future[Any]], None],
    abandon: Callable[[dict[Future[Any], Send]], None],
    interrupted: Callable[[dict[Future[Any], Send]], None],
    gave_up: Callable[[Send, Future[Any]], Exception],
) -> tuple[T, Send] | Exception | None:
    """The sync race: attempts on `pool`'s workers. The loser keeps running on its worker
    (a thread cannot be stopped) and settles when it ends (`settle_loser`); at the deadline
    `abandon` is handed every attempt still running (and raises); when the caller is
    interrupted (Ctrl-C), `interrupted` is, before the interruption goes on. An attempt
    with no answer when its route's first-token limit passes leaves the race (`gave_up`
    tells the plan and gives the error it counts as), as the async race's attempts do:
    it can no longer win, whatever it answers later. Returns the winner's result and send,
    or the last error (None: none) when every attempt failed."""
    # Decided when an attempt answers, by its own worker before its future completes: the
    # worker may take the hedge from the queue next, before the caller wakes to stop it.
    # An attempt no worker began by then is never sent (`Decided`).
    lock = threading.Lock()
    decided: list[Send | None] = [None]  # the winner, once there is one
    began: set[int] = set()
    out: set[int] = set()  # attempts past their first-token limit: they cannot win

    def running(send: Send) -> T:
        with lock:
            if decided[0] is not None:
                raise Decided(decided[0])
            began.add(id(send))
        result = run(send)
        with lock:
            if id(send) not in out:
                decided[0] = decided[0] or send
        return result

    futures: dict[Future[Any], Send] = {}
    limits: dict[Future[Any], float] = {}  # each attempt's first-token limit, as a time

    def submit(send: Send) -> None:
        future = pool.submit(running, send)
        futures[future] = send
        limit = send.route.first_token_timeout
        if limit is not None:
            limits[future] = time.monotonic() + limit

    def past_limits() -> Exception | None:
        """Take out of the race every attempt whose first-token limit has passed."""
        now, given_up = time.monotonic(), None
        for future, until in list(limits.items()):
            if until > now or future not in futures or future.done():
                continue
            send = futures[future]
            with lock:
                if decided[0] is send:
                    continue  # it answered as its limit passed: its future completes next
                out.add(id(send))
            del futures[future]
            given_up = gave_up(send, future)
        return given_up

    def next_wait(hedge_at: float | None) -> float | None:
        """Seconds until the deadline, a limit or the hedge, whichever comes first."""
        now = time.monotonic()
        times = [until for future, until in limits.items() if future in futures]
        if hedge_at is not None:
            times.append(hedge_at)
        found = [max(t - now, 0.0) for t in times]
        if plan.deadline is not None:
            found.append(max(plan.deadline.left(), 0.0))
        return min(found) if found else None

    submit(first)

    refused: list[Send] = []  # taken by a worker after the race was won: not sent

    def give_back_refused(*, bounded: bool = True) -> None:
        # Every refused attempt is told once, whichever way the race ends: won, abandoned
        # at the deadline while the winner's future was completing, or interrupted.
        for future, send in list(futures.items()):
            if future.done() and isinstance(future.exception(), Decided):
                del futures[future]
                refused.append(send)
        for other in refused:
            plan.run(plan.lost(other, decided[0] or other, running=False, sent=False), bounded=bounded)
        refused.clear()

    def losers(to: Send) -> None:
        with lock:
            decided[0] = decided[0] or to
            unsent = {id(s) for s in futures.values() if id(s) not in began}
        give_back_refused()
        for other_future, other in futures.items():
            if id(other) in unsent:  # taken from the queue now, or refused when a worker takes it
                other_future.cancel()
                plan.run(plan.lost(other, to, running=False, sent=False))
                continue
            plan.run(plan.lost(other, to, running=True))
            other_future.add_done_callback(lambda f, s=other: settle_loser(s, f))  # type: ignore[misc]

    try:
        deadline = plan.deadline
        hedge_at: float | None = time.monotonic() + after
        last: Exception | None = None
        while futures:
            done, _ = wait(futures, timeout=next_wait(hedge_at), return_when=FIRST_COMPLETED)
            if not done:
                given_up = past_limits()
                last = given_up or last
                if deadline is not None and deadline.passed():
                    give_back_refused(bounded=False)
                    abandon(futures)  # the deadline passed with every attempt still running
                if hedge_at is not None and time.monotonic() >= hedge_at and futures:
                    hedge_at = None
                    extra = plan.run(plan.hedge())
                    if extra is not None:
                        submit(extra)
                continue
            for future in done:
                send = futures.pop(future)
                error = future.exception()
                if isinstance(error, Decided):  # the winner's future completes next
                    refused.append(send)
                    continue
                if error is None:
                    losers(send)
                    return future.result(), send
                if not isinstance(error, Exception) or not failed(send, error):
                    losers(send)
                    raise error
                last = error
        return last
    except BaseException as stop:
        if not isinstance(stop, Exception):  # Ctrl-C: every attempt out settles when it ends
            give_back_refused(bounded=False)
            interrupted(futures)
        raise


async def arace(
    plan: Plan,
    first: Send,
    run: Callable[[Send], Awaitable[T]],
    after: float,
    failed: Callable[[Send, Exception], Awaitable[bool]],
    step: Callable[..., Awaitable[Any]],
    later: Callable[[Steps[Any]], None],
) -> tuple[T, Send] | Exception | None:
    """The async race: attempts as tasks; the loser is cancelled and charged what it may
    have billed. A cancellation of the caller cancels every attempt still out and tells the
    plan of each once (charged once it may have left, else given back), the hedge being
    admitted included. Returns as `race` does."""
    tasks: dict[asyncio.Future[Any], Send] = {asyncio.ensure_future(run(first)): first}
    last: Exception | None = None

    def given_back(extra: Send | None) -> None:
        # The caller was cancelled while the hedge was being admitted: nothing was sent.
        if extra is not None:
            later(plan.cancelled(extra, sent=False))

    try:
        done, _ = await asyncio.wait(tasks, timeout=after)
        if not done:
            extra = await step(plan.hedge(), undo=given_back)
            if extra is not None:
                tasks[asyncio.ensure_future(run(extra))] = extra
        while tasks:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                send = tasks.pop(task)
                error = task.exception()
                if error is None:
                    await _cancel(tasks, send, plan, step)
                    return task.result(), send
                if not isinstance(error, Exception) or not await failed(send, error):
                    await _cancel(tasks, send, plan, step)
                    raise error
                last = error
    except asyncio.CancelledError:
        for task, send in tasks.items():
            task.cancel()
            later(plan.cancelled(send, sent=True))
        raise
    return last


async def _cancel(
    tasks: dict[asyncio.Future[Any], Send],
    winner: Send,
    plan: Plan,
    step: Callable[[Steps[Any]], Awaitable[Any]],
) -> None:
    """Cancel every attempt still racing and tell the plan it lost to `winner`."""
    for task in tasks:
        task.cancel()
    for task, send in list(tasks.items()):
        with contextlib.suppress(BaseException):
            await task
        await step(plan.lost(send, winner, running=False))
    tasks.clear()
