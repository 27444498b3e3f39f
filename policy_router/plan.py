"""The decision core: what to try next, and what an outcome means. Pure; no I/O.

A `Plan` is one request's decisions. The drivers (sync, async, streams) ask it `next()`,
which answers "send to this route" or "nothing more to try"; they send, and tell it the
outcome (`answered` or `failed` with a classified `Fault`). It never calls LiteLLM and never
reads the time except through the injected clock, so every policy is tested here without
a network, and the drivers cannot disagree about policy because they hold none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from .budget import Ledger, RequestFacts, Reservation
from .capabilities import Capabilities
from .clock import Clock
from .errors import NoRouteError, OverBudgetError, RefusedError
from .journey import Attempt, Check, Explanation, Journey, Skip, Verdict
from .order import DEFAULT_REPLY_TOKENS
from .prices import Money, Price, Usage
from .requirements import Requirements
from .route import Reach, Route

__all__ = ["Candidate", "Fault", "FaultKind", "Plan", "Send"]


class FaultKind(StrEnum):
    """What a failed attempt was about; decides whether the router moves on or stops."""

    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    STREAM_CUT = "stream_cut"
    ACCESS = "access"
    BAD_REQUEST = "bad_request"
    REFUSED = "refused"

    @property
    def about(self) -> str:
        """ "provider", "route" (its configuration), "request" or "work" (content policy)."""
        if self in (FaultKind.BAD_REQUEST,):
            return "request"
        if self is FaultKind.REFUSED:
            return "work"
        if self is FaultKind.ACCESS:
            return "route"
        return "provider"

    @property
    def falls_through(self) -> bool:
        """True when another route may succeed where this one failed."""
        return self.about in ("provider", "route")


@dataclass(frozen=True, slots=True)
class Fault:
    """A classified failure: its kind, the HTTP status if any, the text, and Retry-After."""

    kind: FaultKind
    status: int | None = None
    message: str = ""
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A route of a group with its capabilities looked up once (at router build time)."""

    route: Route
    capabilities: Capabilities
    price: Price | None = None

    @property
    def name(self) -> str:
        return self.route.name


@dataclass(frozen=True, slots=True)
class Send:
    """The core's instruction: send the request to `candidate`'s route now."""

    candidate: Candidate
    started: float
    held: Reservation | None = None

    @property
    def route(self) -> Route:
        return self.candidate.route


Ordering = Callable[[Sequence[Candidate]], Sequence[Candidate]]


def static_skip(candidate: Candidate, needs: Requirements) -> Skip | None:
    """The first of the checks that do not change during a request that stops a route."""
    route, caps = candidate.route, candidate.capabilities
    if not caps.known:
        return Skip(route.name, Check.KNOWN, "unknown model", {"why": caps.why_unknown})
    unmet = needs.unmet_by(caps)
    if unmet:
        names = ", ".join(c.value.replace("_", " ") for c in unmet)
        return Skip(
            route.name,
            Check.REQUIREMENTS,
            f"cannot do {names}",
            {"missing": tuple(c.value for c in unmet)},
        )
    if needs.on_device and route.reach is not Reach.ON_DEVICE:
        how = "declared" if route.reach_declared else "inferred from its api_base"
        return Skip(
            route.name,
            Check.FLOOR,
            f"vendor route ({how}); the request is on-device only",
            {"reach": route.reach.value},
        )
    return None


class Plan:
    """One request's decisions, from the first route considered to the outcome.

    Thread-compatible, not thread-safe: one plan belongs to one request. The store behind
    the ledger is the only shared state it touches, through atomic operations.
    """

    def __init__(
        self,
        group: str,
        candidates: Sequence[Candidate],
        needs: Requirements,
        *,
        clock: Clock,
        ordering: Ordering | None = None,
        ledger: Ledger | None = None,
        facts: RequestFacts | None = None,
    ) -> None:
        self.group = group
        self.needs = needs
        self._clock = clock
        self._ledger = ledger
        self._facts = facts
        self._started = clock.now()
        self._steps: list[Skip | Attempt] = []
        eligible: list[Candidate] = []
        for c in candidates:
            skip = static_skip(c, needs)
            if skip is None:
                eligible.append(c)
            else:
                self._steps.append(skip)
        self._queue = deque(ordering(eligible) if ordering else eligible)
        self._answered: Candidate | None = None
        self._stop: Fault | None = None
        self._last_fault: Fault | None = None

    # -- what to do next -------------------------------------------------------------------
    def next(self) -> Send | None:
        """The next route to send to, or None when the request is answered or cannot be.

        The budget's reservation for the attempt is taken here, atomically; the outcome
        methods below settle or release it.
        """
        if self._answered is not None or self._stop is not None:
            return None
        while self._queue:
            candidate = self._queue.popleft()
            held = None
            if self._ledger is not None and self._facts is not None:
                admitted = self._ledger.admit(candidate.route, self._facts)
                if isinstance(admitted, Skip):
                    self._steps.append(admitted)
                    continue
                held = admitted
            return Send(candidate, self._clock.now(), held)
        return None

    # -- outcomes --------------------------------------------------------------------------
    def answered(self, send: Send, usage: Usage | None = None, *, final: bool = True) -> None:
        """The route answered. For a stream (`final=False`) its first chunk arrived, and
        its cost is settled later by `finished`."""
        cost = self._settle(send, usage) if final else None
        self._steps.append(
            Attempt(send.route.name, "answered", elapsed=self._since(send), cost=cost)
        )
        self._answered = send.candidate

    def finished(self, send: Send, usage: Usage | None) -> None:
        """A stream that answered has ended or been closed: settle what it cost."""
        cost = self._settle(send, usage)
        if cost is not None:
            self._replace_answer(send, lambda a: replace(a, cost=cost))

    def failed(self, send: Send, fault: Fault) -> None:
        """The route failed with `fault` before answering: release, and decide what next."""
        self._release(send)
        if fault.kind.falls_through:
            then = "next route" if self._queue else "no route left"
        else:
            self._stop = fault
            then = (
                "stopped: another model would fail alike"
                if fault.kind.about == "request"
                else "stopped: a refusal is not shopped around"
            )
        self._last_fault = fault
        self._steps.append(self._failure(send, fault, then))

    def failed_after_answer(self, send: Send, fault: Fault, usage: Usage | None = None) -> None:
        """A stream that had started failed later: recorded, and the answer is void.

        The provider generated (and will bill) part of a reply, so the call is charged: by
        its usage when known, else at its reservation, counted as unmeasured. The failure
        replaces the attempt's "answered" record: one request, one attempt.
        """
        cost = self._settle(send, usage)
        self._answered = None
        self._stop = fault
        self._last_fault = fault
        failed = self._failure(send, fault, "raised in the stream", cost)
        if not self._replace_answer(send, lambda _: failed):
            self._steps.append(failed)

    def _failure(self, send: Send, fault: Fault, then: str, cost: Money | None = None) -> Attempt:
        return Attempt(
            send.route.name,
            fault.kind.value,
            status=fault.status,
            error=send.route.redact(fault.message),
            elapsed=self._since(send),
            then=then,
            cost=cost,
        )

    def _replace_answer(self, send: Send, change: Callable[[Attempt], Attempt]) -> bool:
        for i in range(len(self._steps) - 1, -1, -1):
            step = self._steps[i]
            if isinstance(step, Attempt) and step.route == send.route.name and step.ok:
                self._steps[i] = change(step)
                return True
        return False

    def _settle(self, send: Send, usage: Usage | None) -> Money | None:
        if send.held is not None and self._ledger is not None:
            return self._ledger.settle(send.held, usage)
        price, table = send.candidate.price, send.route.prices
        if price is None or usage is None or table is None:
            return None
        return Money(price.cost(usage), table.currency)

    def _release(self, send: Send) -> None:
        if send.held is not None and self._ledger is not None:
            self._ledger.release(send.held)

    def _since(self, send: Send) -> float:
        return max(0.0, self._clock.now() - send.started)

    # -- the result ------------------------------------------------------------------------
    @property
    def journey(self) -> Journey:
        """The journey so far (a new frozen value each time it is read)."""
        return Journey(
            self.group,
            self.needs,
            tuple(self._steps),
            answered_by=self._answered.name if self._answered else None,
            elapsed=max(0.0, self._clock.now() - self._started),
        )

    def error(self, last: BaseException | None) -> BaseException:
        """The exception to raise when the request ends unanswered.

        After real attempts: the last provider's own exception `last`, with the journey
        attached as `.journey` and in its notes (a refusal becomes `RefusedError` from it).
        With nothing sent: `OverBudgetError` when the budget refused a route, else
        `NoRouteError`, naming what each route lacked.
        """
        journey = self.journey
        if last is not None and journey.attempts:
            if self._last_fault is not None and self._last_fault.kind is FaultKind.REFUSED:
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
            f"no route in group {self.group!r} can serve this request "
            f"(needs {self.needs.describe()}): {reasons}"
        )
        if any(s.check is Check.BUDGET for s in journey.skips):
            return OverBudgetError(message + "; nothing was sent", journey=journey)
        return NoRouteError(message, journey=journey)


def explain(
    group: str,
    candidates: Sequence[Candidate],
    needs: Requirements,
    ordering: Ordering | None = None,
    ledger: Ledger | None = None,
    facts: RequestFacts | None = None,
) -> Explanation:
    """Every route's verdict for a request, in the order the router would consider them.

    Nothing is sent and nothing is reserved: the budget is asked what it would do now.
    """
    skips: dict[str, Skip] = {}
    eligible: list[Candidate] = []
    for c in candidates:
        skip = static_skip(c, needs)
        if skip is None:
            eligible.append(c)
        else:
            skips[c.name] = skip
    verdicts: list[Verdict] = []
    for c in ordering(eligible) if ordering else eligible:
        reason = f"{c.route.reach.value}; can do {c.capabilities.describe()}"
        if facts is not None and c.price is not None and c.route.prices is not None:
            est = c.price.estimate(facts.prompt_tokens, facts.max_tokens or DEFAULT_REPLY_TOKENS)
            reason += f"; est. {Money(est, c.route.prices.currency)}"
        if ledger is not None and facts is not None:
            verdict = ledger.check(c.route, facts)
            if isinstance(verdict, Skip):
                verdicts.append(Verdict(c.name, None, verdict.check, verdict.reason))
                continue
        verdicts.append(
            Verdict(c.name, len([v for v in verdicts if v.would_try]) + 1, None, reason)
        )
    verdicts += [
        Verdict(c.name, None, skips[c.name].check, skips[c.name].reason)
        for c in candidates
        if c.name in skips
    ]
    return Explanation(group, needs, tuple(verdicts))
