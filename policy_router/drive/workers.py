"""The sync attempts that run on a worker: under a deadline, a first-token limit or a
hedge, the caller stops waiting for a thread a call cannot be taken from, and the call
settles its cost (and, as the case says, its health) when it ends.

The workers may all be busy, so an attempt can wait in the pool's queue. One the caller
stopped waiting for before a worker took it is never sent: it is taken out of the queue
(and everything it held given back), or, when a worker took it in that instant, the worker
finds the deadline passed and sends nothing."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from ..core.gate import Send
from ..core.plan import Plan
from ..ground.outcome import Fault, FaultKind
from . import hedged
from .attempts import NO_FIRST_TOKEN, cut, failed
from .seam import failures, raised

__all__ = ["WORKERS", "Abandoned", "GaveUp", "race", "within"]

T = TypeVar("T")
# Sync calls under a deadline run here, so the caller can stop waiting at the deadline
# even while a provider trickles its reply. Threads are created only as calls need them.
WORKERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="policy_router")


class Abandoned(Exception):
    """The deadline passed while a sync call was still running on its worker."""


class NotStarted(Exception):
    """A worker took the attempt from the queue after its deadline had passed: it was not
    sent."""


def _queued(plan: Plan, open_: Callable[[Send], T]) -> Callable[[Send], T]:
    """`open_` as a worker runs it: not at all once the request's deadline has passed."""

    def run(send: Send) -> T:
        if plan.deadline is not None and plan.deadline.passed():
            raise NotStarted
        return open_(send)

    return run


class GaveUp(Exception):
    """The attempt's own limit (`Route.first_token_timeout`) passed while a sync call was
    still running on its worker: the next route is asked; `error` is what the request
    raises if none answers."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


UsageReader = Callable[[Any], Any]
"""What reads an answer's billed usage (the endpoint's reader)."""


def within(
    plan: Plan,
    send: Send,
    open_: Callable[[Send], T],
    final: bool,
    usage: UsageReader,
    limit: float | None = None,
) -> T:
    """Run one sync attempt on a worker; stop waiting for it at the deadline, or at the
    attempt's own `limit` (its route's first-token limit), whichever comes first.

    An abandoned call keeps running (a thread cannot be cancelled), and settles its cost
    (and, at the deadline, its health) when it ends. At the limit the breaker hears a
    timeout at once and the next route is asked.
    """
    left = plan.deadline.left() if plan.deadline is not None else None
    by_limit = limit is not None and (left is None or limit < left)
    wait = limit if by_limit else left
    assert wait is not None
    future = WORKERS.submit(_queued(plan, open_), send)
    try:
        # A wait longer than the platform's longest (`deadline=1e10`) is as good as none.
        return future.result(timeout=min(wait, threading.TIMEOUT_MAX))
    except NotStarted:  # a worker took it just as the deadline passed: not sent
        _not_sent(plan, send)
        raise Abandoned from None
    except FutureTimeout:
        if by_limit and limit is not None:
            raise GaveUp(_give_up(plan, send, future, limit, final, usage)) from None
        if future.cancel():  # still queued behind busy workers: it is never sent
            _not_sent(plan, send)
            raise Abandoned from None
        plan.abandoned(send)
        future.add_done_callback(lambda f: _settle_late(plan, send, f, final, usage))
        raise Abandoned from None
    except Exception:
        raise  # the call's own error, for the driver to classify
    except BaseException:
        if future.cancel():  # Ctrl-C before a worker took it: nothing sent, nothing held
            plan.run(plan.cancelled(send, sent=False), bounded=False)
            raise
        # Ctrl-C while the worker still runs the call: it is left to end, and settles then.
        plan.abandoned(send, "interrupted by the caller; settles when it ends")
        future.add_done_callback(lambda f: _settle_late(plan, send, f, final, usage))
        raise


def race(
    plan: Plan, first: Send, open_: Callable[[Send], T], after: float, final: bool, usage: UsageReader
) -> tuple[T, Send] | Exception | None:
    """A sync hedged race (`hedged.race`) on the workers; a loser settles when it ends, and
    at the deadline every attempt still running is abandoned to settle when it ends."""

    def told(send: Send, error: Exception) -> bool:
        if isinstance(error, NotStarted):
            _not_sent(plan, send)
            return True
        return plan.run(failed(plan, send, error))

    def settle(send: Send, future: Future[Any]) -> None:
        _settle_late(plan, send, future, final, usage, health=False)

    def abandon(running: dict[Future[Any], Send]) -> None:
        for future, send in running.items():
            if future.cancel():  # still queued: never sent
                _not_sent(plan, send)
                continue
            plan.abandoned(send)
            future.add_done_callback(lambda f, s=send: _settle_late(plan, s, f, final, usage))  # type: ignore[misc]
        raise Abandoned

    def interrupted(running: dict[Future[Any], Send]) -> None:
        for future, send in running.items():
            if future.cancel():  # Ctrl-C before a worker took it: nothing sent
                plan.run(plan.cancelled(send, sent=False), bounded=False)
                continue
            plan.abandoned(send, "interrupted by the caller; settles when it ends")
            future.add_done_callback(lambda f, s=send: _settle_late(plan, s, f, final, usage))  # type: ignore[misc]

    def gave_up(send: Send, future: Future[Any]) -> Exception:
        limit = send.route.first_token_timeout
        assert limit is not None, "only an attempt with a first-token limit is given up"
        return _give_up(plan, send, future, limit, final, usage)

    return hedged.race(
        plan, first, _queued(plan, open_), after, WORKERS, told, settle, abandon, interrupted, gave_up
    )


def _give_up(
    plan: Plan, send: Send, future: Future[Any], limit: float, final: bool, usage: UsageReader
) -> Exception:
    """Stop waiting for an attempt with no first token within its route's `limit`: the
    breaker hears a timeout at once, and the error the request raises if no route answers
    is returned. Still queued behind busy workers, it is never sent; already on a worker,
    it may yet be sent and billed, and settles its cost when it ends."""
    if future.cancel():
        _not_sent(plan, send, limit)
    else:
        fault = Fault(FaultKind.TIMEOUT, None, NO_FIRST_TOKEN.format(limit), billed=True)
        plan.run(plan.gave_up(send, fault))
        future.add_done_callback(lambda f: _settle_late(plan, send, f, final, usage, health=False))
    return raised.first_token_error(send.route, limit)


def _not_sent(plan: Plan, send: Send, limit: float | None = None) -> None:
    """Tell the plan an attempt never left the workers' queue: its deadline (or, with
    `limit`, its first-token limit) passed while it waited for a free worker. Nothing was
    sent: what it held is given back, and its route hears nothing."""
    why = "the request's deadline" if limit is None else NO_FIRST_TOKEN.format(limit)
    fault = Fault(FaultKind.TIMEOUT, None, f"{why} passed while it waited for a free worker", sent=False)
    plan.run(plan.failed(send, fault), bounded=False)


def _settle_late(
    plan: Plan, send: Send, future: Future[Any], final: bool, usage: UsageReader, *, health: bool = True
) -> None:
    # The caller has gone: these writes are made in this worker, whatever the deadline.
    # With `health` False the breaker was told already (an attempt past its own limit).
    if future.cancelled():
        return  # taken out of the queue: settled when it was
    error = future.exception()
    if isinstance(error, NotStarted):
        _not_sent(plan, send)
        return
    if isinstance(error, hedged.Decided):  # taken as the caller left, after the race was won
        plan.run(plan.lost(send, error.winner, running=False, sent=False), bounded=False)
        return
    if error is not None:
        fault = failures.classify(error, send.wire) or cut(send)
        plan.run(plan.settle_late(send, None, fault, health=health), bounded=False)
        return
    result = future.result()
    if final:
        plan.run(plan.settle_late(send, usage(result), None, health=health), bounded=False)
    else:
        # A stream opened after the caller left: nobody will read it. It is closed and
        # charged its reservation, since the provider was generating for it.
        close = getattr(result[1], "close", None)
        if close is not None:
            close()
        plan.run(plan.settle_late(send, None, None, health=health), bounded=False)
