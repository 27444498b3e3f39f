"""How an attempt ends when its caller stopped waiting for it: the deadline abandoned it,
its own first-token limit gave up on it, the caller cancelled it, or it lost a hedge; and
how a call that was left running settles when it ends.

Each is charged what it may have billed (its reservation, once the request may have left;
its usage, when it answers after all) and released otherwise; what the breaker hears
depends on why the caller stopped waiting. Each is a function over the request's
`Outcomes` (its course, trail and gate); the plan hands the drivers' news to them.
"""

from __future__ import annotations

from dataclasses import replace

from ..ground.money import Usage
from ..ground.outcome import Fault, FaultKind
from ..ground.records import Check, Skip
from ..state.store import Steps
from .gate import Send
from .outcomes import Outcomes

__all__ = ["abandoned", "cancelled", "gave_up", "lost", "raised", "settle_late"]


_CANCELLED = Fault(FaultKind.TIMEOUT, None, "the caller cancelled the request")


def abandoned(
    outcomes: Outcomes, send: Send, then: str = "abandoned at the deadline; settles when it ends"
) -> None:
    """The deadline passed (or the caller was interrupted, `then` says) while a sync
    call was still running on its worker.

    Its reservation stays held and its health unrecorded: `settle_late` settles both
    when the abandoned call ends.
    """
    outcomes.course.expired = True
    fault = Fault(FaultKind.TIMEOUT, None, "the request's deadline passed during this call")
    outcomes.course.last_fault = fault
    outcomes.trail.record(outcomes.failure(send, fault, then))


def cancelled(outcomes: Outcomes, send: Send, *, sent: bool) -> Steps[None]:
    """The caller cancelled the request during this attempt (an async task cancelled).

    Once the request was sent the provider may generate and bill it, so the call is
    charged its reservation, counted as unmeasured; before that it is released. The
    breaker learns nothing either way, and a claimed probe is given back.
    """
    outcomes.course.expired = True
    yield from _stopped(outcomes, send, _CANCELLED, sent=sent, outcome="cancelled")


def raised(outcomes: Outcomes, send: Send, error: BaseException) -> Steps[None]:
    """The call raised an exception that is no provider's outcome: a bug or a misuse on
    this side (LiteLLM's own code failing on an argument it was handed, say `metadata`
    that is not a mapping). The caller gets that exception unchanged, as LiteLLM would
    raise it; what the attempt held is settled first, as a cancelled attempt's is: charged
    its reservation once the request may have left (the provider may bill it), else
    released. The breaker learns nothing: it says nothing about the route."""
    text = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
    fault = Fault(
        FaultKind.BAD_REQUEST, None,
        f"raised {type(error).__name__} on this side, not the provider's outcome"
        + (f": {text}" if text else ""),
        sent=send.wire.left,
    )
    yield from _stopped(outcomes, send, fault, sent=send.wire.left, outcome=fault.kind.value)


def _stopped(outcomes: Outcomes, send: Send, fault: Fault, *, sent: bool, outcome: str) -> Steps[None]:
    """An attempt stopped on this side: charged once it may have left, else released; its
    slot kept or given back alike, its probe given back, the breaker told nothing."""
    cost = (yield from outcomes.settle(send, None)) if sent else None
    yield from outcomes.end_slot(send, send.slot_tokens if sent else None)
    if not sent:
        yield from outcomes.release(send)
    if outcomes.health is not None:
        yield from outcomes.health.release(send.route.id, send.token)
    then = "charged its reservation" if sent else "released; nothing was sent"
    outcomes.trail.record(
        replace(outcomes.failure(send, fault, then, cost), outcome=outcome, status=None)
    )


def gave_up(outcomes: Outcomes, send: Send, fault: Fault) -> Steps[None]:
    """The attempt's own limit passed (`Route.first_token_timeout`) while a sync call
    still runs on its worker: the breaker hears the timeout now and the request moves
    on; the call's money is settled when it ends (`settle_late`, with `health` False)."""
    then = outcomes.after(send, fault) + "; settles when it ends"

    def record(rested: float) -> None:
        outcomes.trail.record(replace(outcomes.failure(send, fault, then), rested=rested))

    yield from outcomes.fault_seen(send, fault, record)


def settle_late(
    outcomes: Outcomes, send: Send, usage: Usage | None, fault: Fault | None, *, health: bool = True
) -> Steps[None]:
    """An abandoned call ended: charge or release it, and (unless `health` is False:
    the breaker was told already) tell the breaker."""
    yield from outcomes.end_slot(send, outcomes.billed(send, usage))
    if fault is None:
        yield from outcomes.settle(send, usage)
        if outcomes.health is not None and health:
            yield from outcomes.health.succeeded(send.route.id, send.token, send.route.name)
    else:
        if fault.billed:
            yield from outcomes.settle(send, None)  # it may have been billed: charged
        else:
            yield from outcomes.release(send)
        if outcomes.health is not None and health:
            yield from outcomes.health.failed(
                send.route.id, outcomes.trail.redacted(send, fault), outcomes.clock.now(), send.token,
                label=send.route.name,
            )


def lost(
    outcomes: Outcomes, send: Send, to: Send, *, running: bool, sent: bool = True
) -> Steps[None]:
    """A hedged attempt lost the race to `to`: no fault of its route (the breaker hears
    nothing; a probe it held is given back). Cancelled (`running` False), it is charged
    its reservation once it may have left, else released; still running on a sync
    worker (`running` True), it settles when it ends (`settle_late` with `health`
    False): by its usage if it answers, else its reservation. Begun by no worker before
    the race was won (`sent` False), it is never sent: what it held is given back, and
    the journey says so (a skip, not an attempt)."""
    then = f"lost the hedge to {to.route.name}"
    if not sent:
        yield from outcomes.release(send)
        yield from outcomes.end_slot(send, None)
        if outcomes.health is not None:
            yield from outcomes.health.release(send.route.id, send.token)
        outcomes.trail.record(Skip(
            send.route.name, Check.SEND, f"not sent: {then} while it waited for a free worker",
        ))
        return
    if outcomes.latencies is not None:
        # It was at least this slow: kept, so a route's slow tail stays in the history
        # its hedge delay is read from, and the delay does not fall to the fast answers'.
        outcomes.latencies.record(send.route.id, outcomes.since(send))
    if running:
        outcomes.trail.record(
            replace(outcomes.failure(send, _CANCELLED, then + "; settles when it ends"),
                    outcome="cancelled", status=None)
        )
        if outcomes.health is not None:
            yield from outcomes.health.release(send.route.id, send.token)
        return
    # Cancelled mid-call it may have been billed (an embedding's path says nothing of
    # sending): charged its reservation, counted as unmeasured.
    cost = yield from outcomes.settle(send, None)
    yield from outcomes.end_slot(send, send.slot_tokens)
    if outcomes.health is not None:
        yield from outcomes.health.release(send.route.id, send.token)
    then += "; charged its reservation"
    outcomes.trail.record(
        replace(outcomes.failure(send, _CANCELLED, then, cost), outcome="cancelled", status=None)
    )
