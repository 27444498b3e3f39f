"""The drivers: the same short loop, sync and async, around the decision core.

Each asks the plan what to do, sends through `transport`, and tells the plan the outcome;
they differ only in `call` versus `await acall`, in how they wait out a retry, and in how
they hold the deadline: async by cancelling the attempt, sync by running it on a worker
that the caller stops waiting for (LiteLLM's `timeout=` bounds each socket read, not the
call, so a trickling provider would otherwise hold a sync caller past its deadline).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..core.gate import Send
from ..core.plan import Plan
from ..endpoints import reading
from ..state.store import Steps, aperform
from . import hedged
from .attempts import AttemptCut, cut, failed, no_first_token
from .seam import raised
from .workers import Abandoned, GaveUp, UsageReader, race, within

__all__ = ["adrive", "drive", "later", "step"]

T = TypeVar("T")

class _Ending:
    """Tells the plan its request ended when the driver returns or raises: with the error
    that escapes, or, for a final answer, with none (a stream is told when it ends)."""

    __slots__ = ("final", "plan")

    def __init__(self, plan: Plan, final: bool) -> None:
        self.plan, self.final = plan, final

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        if error is not None:
            self.plan.ended(error)
        elif self.final:
            self.plan.ended()


def drive(
    plan: Plan,
    open_: Callable[[Send], T],
    *,
    final: bool = True,
    usage: UsageReader = reading.usage_of,
) -> tuple[T, Send]:
    """The sync driver: ask the plan, send, tell it the outcome, until answered or done.

    `usage` reads what an answer billed (the endpoint's reader); a stream (`final=False`)
    is settled when it ends instead.
    """
    with _Ending(plan, final):
        return _drive(plan, open_, final, usage)


def _drive(plan: Plan, open_: Callable[[Send], T], final: bool, usage: UsageReader) -> tuple[T, Send]:
    last: BaseException | None = None
    while True:
        send = plan.run(plan.next())
        if send is None:
            wait = plan.capacity_wait()
            if wait is None:
                break
            _sleep(plan, wait)  # every route is full: nothing is held while waiting
            plan.waited(wait)
            continue
        limit = send.route.first_token_timeout
        after = plan.hedge_delay(send) if plan.hedging else None
        on_worker = False
        try:
            if send.wait:
                _sleep(plan, send.wait)
            # From here a call on a worker is the worker's to settle, whatever happens.
            on_worker = after is not None or plan.deadline is not None or limit is not None
            if after is not None:  # a hedged race: the first answer wins
                won = race(plan, send, open_, after, final, usage)
                if not isinstance(won, tuple):
                    last = won or last
                    continue
                result, send = won
            else:
                result = (
                    open_(send)
                    if plan.deadline is None and limit is None
                    else within(plan, send, open_, final, usage, limit)
                )
        except Abandoned:
            break
        except GaveUp as gave_up:  # no first token in time: the next route
            last = gave_up.error
            continue
        except Exception as exc:
            if not plan.run(failed(plan, send, exc)):
                raise
            last = exc
            continue
        except BaseException:
            # Ctrl-C (or a SystemExit) in the middle of the call: what it held is given
            # back, or charged once it may have left, before the interruption goes on.
            # (A call on a worker, under a deadline, a first-token limit or a hedge, is
            # left by `within` or the race to settle when it ends.)
            if not on_worker:
                plan.run(plan.cancelled(send, sent=send.wire.left), bounded=False)
            raise
        plan.run(_answered(plan, send, result, final, usage))
        return result, send
    raise plan.error(last)


async def adrive(
    plan: Plan,
    open_: Callable[[Send], Awaitable[T]],
    *,
    final: bool = True,
    usage: UsageReader = reading.usage_of,
) -> tuple[T, Send]:
    """The async driver: the same loop as `drive`; the deadline cancels the attempt.

    A cancelled task is told to the plan (its reservation charged or released, its probe
    given back) before the cancellation goes on, so nothing stays held.
    """
    with _Ending(plan, final):
        return await _adrive(plan, open_, final, usage)


async def _adrive(
    plan: Plan, open_: Callable[[Send], Awaitable[T]], final: bool, usage: UsageReader
) -> tuple[T, Send]:
    last: BaseException | None = None
    while True:
        send = await step(plan, plan.next(), undo=_given_back(plan))
        if send is None:
            wait = plan.capacity_wait()
            if wait is None:
                break
            await _asleep(plan, wait)  # cancelled here, it holds nothing it must give back
            plan.waited(wait)
            continue
        sent = raced = False
        try:
            if send.wait:
                await _asleep(plan, send.wait)
            sent = True
            after = plan.hedge_delay(send) if plan.hedging else None
            if after is None:
                result = await _attempt(plan, send, open_)
            else:  # a hedged race: the first answer wins
                raced = True  # a cancelled race tells the plan of each of its attempts
                won = await hedged.arace(
                    plan, send, lambda s: _attempt(plan, s, open_), after,
                    lambda s, e: step(plan, failed(plan, s, e)),
                    lambda steps, undo=None: step(plan, steps, undo=undo),
                    lambda steps: later(plan, steps),
                )
                if not isinstance(won, tuple):
                    last = (won.error if isinstance(won, AttemptCut) else won) or last
                    continue
                result, send = won
        except asyncio.CancelledError:
            if not raced:
                later(plan, plan.cancelled(send, sent=sent))
            raise
        except Exception as exc:
            if not await step(plan, failed(plan, send, exc)):
                raise
            last = exc.error if isinstance(exc, AttemptCut) else exc
            continue
        await step(plan, _answered(plan, send, result, final, usage))
        return result, send
    raise plan.error(last)


async def _attempt(plan: Plan, send: Send, open_: Callable[[Send], Awaitable[T]]) -> T:
    """One async attempt, bounded by the request's deadline and the route's first-token
    limit, whichever comes first (a cut raises `AttemptCut`)."""
    limit = send.route.first_token_timeout
    left = plan.deadline.left() if plan.deadline is not None else None
    by_limit = limit is not None and (left is None or limit < left)
    wait = limit if by_limit else left
    if wait is None:
        return await open_(send)
    bound = asyncio.timeout(wait)
    try:
        async with bound:
            return await open_(send)
    except TimeoutError as expired:
        if not bound.expired():
            raise  # a TimeoutError of the call's own, not the cut
        if by_limit and limit is not None:
            raise AttemptCut(
                no_first_token(send, limit), raised.first_token_error(send.route, limit)
            ) from expired
        raise AttemptCut(cut(send), expired) from expired


# Store steps finished after their task was cancelled; held so they are not collected.
_LATER: set[asyncio.Task[Any]] = set()


async def step(
    plan: Plan,
    steps: Steps[T],
    *,
    undo: Callable[[T], None] | None = None,
    bounded: bool = True,
) -> T:
    """Run a plan step from async code (see `store.aperform`); waits on a remote store end
    at the request's deadline unless `bounded` is False.

    With an in-process store it runs inline, to the end, without yielding to the loop.
    With a remote store its calls are awaited; if the awaiting task is cancelled then, the
    step still runs to the end (a half-done store write would lose money) and `undo` is
    given its result.
    """
    if not plan.store.remote:
        return plan.run(steps)
    task = asyncio.ensure_future(aperform(plan.store, steps, plan.deadline if bounded else None))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        _LATER.add(task)
        task.add_done_callback(_LATER.discard)
        if undo is not None:
            task.add_done_callback(
                lambda t: None if t.cancelled() or t.exception() else undo(t.result())
            )
        raise


def later(plan: Plan, steps: Steps[object]) -> None:
    """Run a plan step without waiting for it (from a task that is being cancelled)."""
    if not plan.store.remote:
        plan.run(steps)
        return
    task = asyncio.ensure_future(aperform(plan.store, steps))
    _LATER.add(task)
    task.add_done_callback(_LATER.discard)


def _given_back(plan: Plan) -> Callable[[Send | None], None]:
    """What undoes a `next()` whose caller was cancelled before it saw the route."""

    def undo(send: Send | None) -> None:
        if send is not None:
            later(plan, plan.cancelled(send, sent=False))

    return undo


def _answered(plan: Plan, send: Send, result: Any, final: bool, usage: UsageReader) -> Steps[None]:
    """Tell the plan the route answered, for both drivers: whether LiteLLM answered from
    its cache, what the answer billed and which model the provider says answered (a
    stream's usage is read when it ends)."""
    send.wire.cached = reading.cache_hit(result)
    if not final:
        return plan.answered(send, None, final=False)
    return plan.answered(
        send, usage(result), final=True, model=reading.model_of(result), made=reading.id_of(result)
    )


def _sleep(plan: Plan, seconds: float) -> None:
    # A clock that can sleep (ManualClock) is slept on, so a test's time moves at once.
    getattr(plan.clock, "sleep", time.sleep)(seconds)


async def _asleep(plan: Plan, seconds: float) -> None:
    sleep = getattr(plan.clock, "sleep", None)
    if sleep is None:
        await asyncio.sleep(seconds)
    else:
        sleep(seconds)
        await asyncio.sleep(0)
