"""The drivers: the same short loop, sync and async, around the decision core.

Each asks the plan what to do, sends through `transport`, and tells the plan the outcome;
they differ only in `call` versus `await acall`, in how they wait out a retry, and in how
they hold the deadline: async by cancelling the attempt, sync by running it on a worker
that the caller stops waiting for (LiteLLM's `timeout=` bounds each socket read, not the
call, so a trickling provider would otherwise hold a sync caller past its deadline).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any, TypeVar

from ..core.gate import Send
from ..core.plan import Plan
from ..endpoints import reading
from ..ground.outcome import Fault, FaultKind
from ..state.store import Steps, aperform
from . import failures

__all__ = ["adrive", "drive", "later", "step"]

T = TypeVar("T")

# Sync calls under a deadline run here, so the caller can stop waiting at the deadline
# even while a provider trickles its reply. Threads are created only as calls need them.
_WORKERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="policy_router")


class _Abandoned(Exception):
    """The deadline passed while a sync call was still running on its worker."""


Usage = Callable[[Any], Any]


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
    usage: Usage = reading.usage_of,
) -> tuple[T, Send]:
    """The sync driver: ask the plan, send, tell it the outcome, until answered or done.

    `usage` reads what an answer billed (the endpoint's reader); a stream (`final=False`)
    is settled when it ends instead.
    """
    with _Ending(plan, final):
        return _drive(plan, open_, final, usage)


def _drive(plan: Plan, open_: Callable[[Send], T], final: bool, usage: Usage) -> tuple[T, Send]:
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
        if send.wait:
            _sleep(plan, send.wait)
        try:
            result = (
                open_(send) if plan.deadline is None else _within(plan, send, open_, final, usage)
            )
        except _Abandoned:
            break
        except Exception as exc:
            if not plan.run(_failed(plan, send, exc)):
                raise
            last = exc
            continue
        except BaseException:
            # Ctrl-C (or a SystemExit) in the middle of the call: what it held is given
            # back, or charged once it may have left, before the interruption goes on.
            # (Under a deadline the call ran on a worker, which `_within` left to settle.)
            if plan.deadline is None:
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
    usage: Usage = reading.usage_of,
) -> tuple[T, Send]:
    """The async driver: the same loop as `drive`; the deadline cancels the attempt.

    A cancelled task is told to the plan (its reservation charged or released, its probe
    given back) before the cancellation goes on, so nothing stays held.
    """
    with _Ending(plan, final):
        return await _adrive(plan, open_, final, usage)


async def _adrive(
    plan: Plan, open_: Callable[[Send], Awaitable[T]], final: bool, usage: Usage
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
        sent = False
        try:
            if send.wait:
                await _asleep(plan, send.wait)
            sent = True
            if plan.deadline is None:
                result = await open_(send)
            else:
                async with asyncio.timeout(plan.deadline.left()):
                    result = await open_(send)
        except asyncio.CancelledError:
            later(plan, plan.cancelled(send, sent=sent))
            raise
        except Exception as exc:
            # asyncio.timeout raises a bare TimeoutError when the deadline cancels the call.
            if not await step(plan, _failed(plan, send, exc, bare_timeout_is_deadline=True)):
                raise
            last = exc
            continue
        await step(plan, _answered(plan, send, result, final, usage))
        return result, send
    raise plan.error(last)


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


def _answered(plan: Plan, send: Send, result: Any, final: bool, usage: Usage) -> Steps[None]:
    """Tell the plan the route answered, for both drivers: whether LiteLLM answered from
    its cache, what the answer billed and which model the provider says answered (a
    stream's usage is read when it ends)."""
    send.wire.cached = reading.cache_hit(result)
    if not final:
        return plan.answered(send, None, final=False)
    return plan.answered(
        send, usage(result), final=True, model=reading.model_of(result), made=reading.id_of(result)
    )


_DEADLINE = Fault(FaultKind.TIMEOUT, None, "the request's deadline passed during this call")


def _cut(send: Send) -> Fault:
    """The fault of an attempt the deadline cut: one the provider may be billing when the
    request had left (it is charged its reservation), else one never sent."""
    if send.wire.left:
        return replace(_DEADLINE, billed=True)
    return replace(_DEADLINE, sent=False, message="the request's deadline passed before it was sent")


def _failed(
    plan: Plan, send: Send, exc: Exception, *, bare_timeout_is_deadline: bool = False
) -> Steps[bool]:
    """Tell the plan an attempt failed; False when `exc` is not a provider outcome (a bug
    or a misuse on this side), which the driver then re-raises unchanged."""
    fault = failures.classify(exc, send.wire)
    if fault is None and bare_timeout_is_deadline and isinstance(exc, TimeoutError):
        fault = _cut(send)
    if fault is None:
        plan.scrub(exc)  # in place: the driver re-raises the same exception, scrubbed
        return False
    yield from plan.failed(send, fault)
    return True


def _within(plan: Plan, send: Send, open_: Callable[[Send], T], final: bool, usage: Usage) -> T:
    """Run one sync attempt on a worker; stop waiting for it at the deadline.

    An abandoned call keeps running (a thread cannot be cancelled), and settles its cost
    and health when it ends.
    """
    assert plan.deadline is not None
    future = _WORKERS.submit(open_, send)
    try:
        # A wait longer than the platform's longest (`deadline=1e10`) is as good as none.
        return future.result(timeout=min(plan.deadline.left(), threading.TIMEOUT_MAX))
    except FutureTimeout:
        plan.abandoned(send)
        future.add_done_callback(lambda f: _settle_late(plan, send, f, final, usage))
        raise _Abandoned from None
    except Exception:
        raise  # the call's own error, for the driver to classify
    except BaseException:
        # Ctrl-C while the worker still runs the call: it is left to end, and settles then.
        plan.abandoned(send, "interrupted by the caller; settles when it ends")
        future.add_done_callback(lambda f: _settle_late(plan, send, f, final, usage))
        raise


def _settle_late(plan: Plan, send: Send, future: Future[Any], final: bool, usage: Usage) -> None:
    # The caller has gone: these writes are made in this worker, whatever the deadline.
    error = future.exception()
    if error is not None:
        fault = failures.classify(error, send.wire) or _cut(send)
        plan.run(plan.settle_late(send, None, fault), bounded=False)
        return
    result = future.result()
    if final:
        plan.run(plan.settle_late(send, usage(result), None), bounded=False)
    else:
        # A stream opened after the caller left: nobody will read it. It is closed and
        # charged its reservation, since the provider was generating for it.
        close = getattr(result[1], "close", None)
        if close is not None:
            close()
        plan.run(plan.settle_late(send, None, None), bounded=False)


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
