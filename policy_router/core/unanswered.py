"""The error a request ends with when nothing answered it, and what it says.

After real attempts the caller gets the last provider's own LiteLLM exception, of its own
class, with the journey attached (`exc.journey`) and in its notes; a refusal becomes
`RefusedError`. With nothing sent, the error is one of the package's own, naming what each
route lacked (DESIGN §2).
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..ground.deadline import Deadline
from ..ground.errors import (
    AllRestingError,
    ConfigError,
    DeadlineExceededError,
    NoRouteError,
    OverBudgetError,
    RateLimitedError,
    RefusedError,
    StoreUnavailableError,
)
from ..ground.outcome import Fault, FaultKind
from ..ground.records import Check
from .journey import Journey

__all__ = ["unanswered"]


def unanswered(
    journey: Journey,
    last: BaseException | None,
    *,
    stop: Fault | None,
    last_fault: Fault | None,
    timed_out: bool,
    deadline: Deadline | None,
) -> BaseException:
    """The exception to raise when the request ends unanswered.

    After real attempts: the last provider's own exception `last`, with the journey
    attached as `.journey` and in its notes (a refusal becomes `RefusedError` from it).
    With nothing sent: `OverBudgetError` when the budget refused a route (its store
    unreachable included, as ever), `StoreUnavailableError` when a rate window could not be
    read, `RateLimitedError` or `AllRestingError` when every route was full or resting, else
    `NoRouteError`, naming what each route lacked.
    """
    if stop is not None and not stop.sent and last is not None:
        if stop.local is None:
            # LiteLLM's own check refused the call (UnsupportedParamsError): its class
            # is what a LiteLLM caller catches.
            last.journey = journey  # type: ignore[attr-defined]
            last.add_note(f"policy_router: {journey}")
            return last
        not_sent = ConfigError(
            f"the request was not sent: {stop.local}. Nothing reached a provider and no "
            f"route's health changed; fix the call's arguments. {journey}",
            journey=journey,
        )
        not_sent.__cause__ = last
        return not_sent
    if timed_out and deadline is not None:
        elapsed = deadline.elapsed()
        passed = (
            f"passed after {elapsed:.2f} s" if deadline.passed()
            else f"left too little time to wait for a retry after {elapsed:.2f} s"
        )
        error = DeadlineExceededError(
            f"the deadline of {deadline.seconds:g} s {passed} with no answer. {journey}",
            elapsed=elapsed,
            journey=journey,
        )
        error.__cause__ = last
        return error
    if last is not None and journey.attempts:
        if last_fault is not None and last_fault.kind is FaultKind.REFUSED:
            refused = RefusedError(
                f"{journey.attempts[-1].route} refused the request on content policy; "
                "no other route was asked. " + str(journey),
                provider_error=last,
                journey=journey,
            )
            refused.__cause__ = last
            return refused
        last.journey = journey  # type: ignore[attr-defined]
        last.add_note(f"policy_router: {journey}")
        return last
    reasons = "; ".join(f"{s.route}: {s.reason}" for s in journey.skips) or "it has no routes"
    message = (
        f"no route in group {journey.group!r} can serve this request "
        f"(needs {journey.requirements.describe()}): {reasons}"
    )
    budget = [s for s in journey.skips if s.check is Check.BUDGET]
    if budget:
        tightest = min(budget, key=lambda s: s.detail.get("left", 0))
        resets = tightest.detail.get("resets_at")
        return OverBudgetError(
            message + "; nothing was sent", journey=journey,
            scope=str(tightest.detail.get("scope", "all")),
            resets_at=None if resets is None else datetime.fromtimestamp(resets, UTC),
        )
    if any(s.detail.get("store_unreachable") for s in journey.skips) and not last:
        # A limit that could not be read is no limit reached: the caller is told of the
        # outage, not asked to come back in an infinite number of seconds.
        return StoreUnavailableError(
            f"the shared store could not be reached, so group {journey.group!r} could not "
            f"be checked against its limits; nothing was sent: {reasons}",
            journey=journey,
        )
    resting = [s for s in journey.skips if s.check is Check.BREAKER]
    limited = [s for s in journey.skips if s.check is Check.RATE_LIMIT]
    if limited and not last:
        retry_after = min(
            [max(float(s.detail["frees_in"]), float(s.detail["closed_for"])) for s in limited]
            + [float(s.detail.get("rest_left", 0.0)) for s in resting]
        )
        return RateLimitedError(
            f"every route that could serve group {journey.group!r} is at its rate limit; "
            f"the first has room in {retry_after:.1f} s; nothing was sent: {reasons}",
            retry_after=retry_after,
            journey=journey,
        )
    if resting and not last:
        wakes_in = min(float(s.detail.get("rest_left", 0.0)) for s in resting)
        last_errors = {s.route: str(s.detail.get("last_error") or "") for s in resting}
        said = "; ".join(f"{route}: {error}" for route, error in last_errors.items() if error)
        return AllRestingError(
            f"every route that could serve group {journey.group!r} is resting; the first "
            f"wakes in {wakes_in:.1f} s: {reasons}" + (f"; last errors: {said}" if said else ""),
            wakes_in=wakes_in,
            journey=journey,
            last_errors=last_errors,
        )
    return NoRouteError(message, journey=journey)
