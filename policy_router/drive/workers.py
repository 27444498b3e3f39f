"""The sync attempts that run on a worker: under a deadline, a first-token limit or a
hedge, the caller stops waiting for a thread a call cannot be taken from, and the call
settles its cost (and, as the case says, its health) when it ends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from ..core.gate import Send
from ..core.plan import Plan
from ..ground.outcome import Fault, FaultKind
from . import failures, hedged, raised
from .attempts import NO_FIRST_TOKEN, cut, failed

__all__ = ["WORKERS", "Abandoned", "GaveUp", "race", "within"]

T = TypeVar("T")
# Sync calls under a deadline run here, so the caller can stop waiting at the deadline
# even while a provider trickles its reply. Threads are created only as calls need them.
WORKERS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="policy_router")


class Abandoned(Exception):
    """The deadline passed while a sync call was still running on its worker."""


class GaveUp(Exception):
    """The attempt's own limit (`Route.first_token_timeout`) passed while a sync call was
    still running on its worker: the next route is asked; `error` is what the request
    raises if none answers."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


Usage = Callable[[Any], Any]
"""What reads an answer's billed usage (the endpoint's reader)."""


def within(
    plan: Plan,
    send: Send,
    open_: Callable[[Send], T],
    final: bool,
    usage: Usage,
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
    future = WORKERS.submit(open_, send)
    try:
        # A wait longer than the platform's longest (`deadline=1e10`) is as good as none.
        return future.result(timeout=min(wait, threading.TIMEOUT_MAX))
    except FutureTimeout:
        if by_limit and limit is not None:
            # The worker still runs the call: it may yet be sent, and billed.
            fault = Fault(FaultKind.TIMEOUT, None, NO_FIRST_TOKEN.format(limit), billed=True)
            plan.run(plan.gave_up(send, fault))
            future.add_done_callback(
                lambda f: _settle_late(plan, send, f, final, usage, health=False)
            )
            raise GaveUp(raised.first_token_error(send.route, limit)) from None
        plan.abandoned(send)
        future.add_done_callback(lambda f: _settle_late(plan, send, f, final, usage))
        raise Abandoned from None
    except Exception:
        raise  # the call's own error, for the driver to classify
    except BaseException:
        # Ctrl-C while the worker still runs the call: it is left to end, and settles then.
        plan.abandoned(send, "interrupted by the caller; settles when it ends")
        future.add_done_callback(lambda f: _settle_late(plan, send, f, final, usage))
        raise


def race(
    plan: Plan, first: Send, open_: Callable[[Send], T], after: float, final: bool, usage: Usage
) -> tuple[T, Send] | Exception | None:
    """A sync hedged race (`hedged.race`) on the workers; a loser settles when it ends, and
    at the deadline every attempt still running is abandoned to settle when it ends."""

    def told(send: Send, error: Exception) -> bool:
        return plan.run(failed(plan, send, error))

    def settle(send: Send, future: Future[Any]) -> None:
        _settle_late(plan, send, future, final, usage, health=False)

    def abandon(running: dict[Future[Any], Send]) -> None:
        for future, send in running.items():
            plan.abandoned(send)
            future.add_done_callback(lambda f, s=send: _settle_late(plan, s, f, final, usage))  # type: ignore[misc]
        raise Abandoned

    return hedged.race(plan, first, open_, after, WORKERS, told, settle, abandon)


def _settle_late(
    plan: Plan, send: Send, future: Future[Any], final: bool, usage: Usage, *, health: bool = True
) -> None:
    # The caller has gone: these writes are made in this worker, whatever the deadline.
    # With `health` False the breaker was told already (an attempt past its own limit).
    error = future.exception()
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
