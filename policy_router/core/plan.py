"""The decision core: what to try next, and what an outcome means. Pure; no I/O.

A `Plan` is one request's decisions. The drivers (sync, async, streams) ask it `next()`,
which answers "send to this route" or "nothing more to try"; they send, and tell it the
outcome (`answered` or `failed` with a classified `Fault`). It never calls LiteLLM and never
reads the time except through the injected clock, so every policy is tested here without
a network, and the drivers cannot disagree about policy because they hold none.

Even the store is reached by asking: the methods that reserve, settle or record health are
`Steps` generators that yield `StoreCall`s. A driver runs them with `plan.run(...)` (sync)
or `await aperform(plan.store, ...)` (async); see `store.py`.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..ground.clock import Clock
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
from ..ground.ids import new_id
from ..ground.money import Money, Usage
from ..ground.outcome import Fault, FaultKind
from ..ground.records import Check, Skip
from ..ground.route import Route
from ..policies.bounds import counted_tokens
from ..policies.budget import Ledger, RequestFacts, Reservation
from ..policies.candidate import Candidate
from ..policies.requirements import Requirements
from ..state.memory import InMemoryStore
from ..state.store import Health, Steps, Store, StoreCall, StoreDeadline, perform
from .checks import Ordering, explain, sift, static_skip
from .events import AttemptStarted, RequestEnded, RequestStarted
from .journey import Attempt, Journey, Waited

if TYPE_CHECKING:
    from ..ground.deadline import Deadline
    from ..policies.breaker import HealthBook
    from ..policies.limits import RateBook
    from ..policies.retry import Retry
    from ..state.windows import Window

# Candidate, Fault, FaultKind, explain, sift and static_skip are re-exported: the drivers
# and tests reach the whole decision core through this module.
__all__ = [
    "Candidate",
    "Fault",
    "FaultKind",
    "Plan",
    "Send",
    "explain",
    "sift",
    "static_skip",
]


T = TypeVar("T")

_CANCELLED = Fault(FaultKind.TIMEOUT, None, "the caller cancelled the request")

# Jitter for retry waits, shared: seeding a Random for every plan cost ~14 us a request,
# and jitter needs no stream of its own (Random's methods are safe across threads).
_JITTER = random.Random()


@dataclass(frozen=True, slots=True)
class Send:
    """The core's instruction: send the request to `candidate`'s route now."""

    candidate: Candidate
    started: float
    held: Reservation | None = None
    wait: float = 0.0
    timeout: float | None = None
    number: int = 1
    probe: bool = False
    token: str = ""
    """Names this attempt to the store: the probe it claims is its own, so is its slot."""
    slot_tokens: int | None = None
    """The tokens its rate slot took, when it took one."""
    attempt: int = 1
    """Which send of the request this is (1-based), whatever the route."""

    @property
    def route(self) -> Route:
        return self.candidate.route


class Plan:
    """One request's decisions, from the first route considered to the outcome.

    Thread-compatible, not thread-safe: one plan belongs to one request. The store behind
    the ledger and the health book is the only shared state it touches, through atomic
    operations; it never calls a provider and reads time only from the injected clock.
    """

    def __init__(
        self,
        group: str,
        candidates: Sequence[Candidate],
        needs: Requirements,
        *,
        clock: Clock,
        ordering: Ordering | None = None,
        by_health: Callable[[Sequence[Candidate], Mapping[str, Health]], Sequence[Candidate]]
        | None = None,
        ledger: Ledger | None = None,
        facts: RequestFacts | None = None,
        health: HealthBook | None = None,
        retry: Callable[[Route], Retry | None] | None = None,
        deadline: Deadline | None = None,
        timeout: float | None = None,
        emit: Callable[[object], None] | None = None,
        on_result: Callable[[str, str, float], None] | None = None,
        rng: random.Random | None = None,
        sifted: tuple[Sequence[Candidate], Sequence[Skip]] | None = None,
        store: Store | None = None,
        rates: RateBook | None = None,
        by_windows: Callable[[Sequence[Candidate], Mapping[str, Window]], Sequence[Candidate]]
        | None = None,
        wait_for_capacity: bool = False,
        operation: str = "chat",
        settings: Mapping[str, Any] | None = None,
        frame: Callable[[object], None] | None = None,
    ) -> None:
        self.group = group
        self.store: Store = store or (
            ledger.store if ledger else health.store if health else InMemoryStore()
        )
        self.needs = needs
        self._clock = clock
        self._ledger = ledger
        self._facts = facts
        self._health = health
        self._retry = retry
        self.deadline = deadline
        self._timeout = timeout
        self._emit = emit or (lambda _record: None)
        self._on_result = on_result
        self._rng = rng or _JITTER
        self._started = clock.now()
        self.id = new_id()
        self._sends = 0
        self._attempts = 0
        self._ended = False
        self._steps: list[Skip | Attempt | Waited] = []
        # The records that frame a request (events.py) go to `frame`, when an observer
        # wants them; the router leaves it None otherwise, which costs nothing per call.
        self._frame = frame
        if frame is not None:
            frame(RequestStarted(self.id, group, operation, needs, settings or {}))
        eligible, skips = sifted if sifted is not None else sift(candidates, needs)
        for skip in skips:
            self._record(skip)
        self._eligible = ordering(eligible) if ordering else eligible
        # Each entry: the candidate, the wait before sending, and which request it is.
        self._queue: deque[tuple[Candidate, float, int]] = deque(
            (c, 0.0, 1) for c in self._eligible
        )
        # An ordering that reads health (or rate windows) waits for the first `next()`,
        # which fetches every record in one store call rather than one call per route.
        self._by_health = by_health
        self._by_windows = by_windows
        self._reorder = True
        self._rates = rates
        self._wait_for_capacity = wait_for_capacity
        self._round: list[Skip] = []  # why routes were passed over since the last wait
        self._tried_in_round = False
        self._poll = 0.05
        self._answered: Candidate | None = None
        self._stop: Fault | None = None
        self._last_fault: Fault | None = None
        self.expired = False

    @property
    def clock(self) -> Clock:
        return self._clock

    def _record(self, step: Skip | Attempt | Waited) -> None:
        if not isinstance(step, Attempt) and not step.journey_id:
            # A skip may be shared (sifted once per group and needs): this request's copy.
            step = replace(step, group=self.group, journey_id=self.id)
        self._steps.append(step)
        self._emit(step)

    def _passed_over(self, skip: Skip) -> None:
        self._round.append(skip)
        self._record(skip)

    # -- what to do next -------------------------------------------------------------------
    def run(self, steps: Steps[T], *, bounded: bool = True) -> T:
        """Run one of this plan's steps against its store, in this thread; waits on a
        remote store end at the request's deadline unless `bounded` is False (a stream's
        settle after its first chunk, which the deadline no longer covers)."""
        return perform(self.store, steps, self.deadline if bounded else None)

    def next(self) -> Steps[Send | None]:
        """The next route to send to, or None when the request is answered or cannot be.

        Checks run in DESIGN §2's order: breaker, then the route's rate window (whose slot
        is taken here), then budget (whose reservation is taken here, atomically), then the
        deadline. The outcome methods settle or release. When
        the deadline passes while the store is being asked, the request expires: what the
        attempt may have claimed is given back, deferred to the store.
        """
        if self._answered is not None or self._stop is not None or self.expired:
            return None
        try:
            return (yield from self._next())
        except StoreDeadline:
            self.expired = True
            return None

    def _next(self) -> Steps[Send | None]:
        if self._by_health is not None:
            seen: Mapping[str, Health] = yield StoreCall("all_health")
            ordered = self._by_health([c for c, _, _ in self._queue], seen)
            self._queue = deque((c, 0.0, 1) for c in ordered)
            self._by_health = None
        if self._by_windows is not None and self._reorder:
            # Once per round: a retry queued after a failure keeps its place and its wait.
            self._reorder = False
            names = [c.name for c, _, _ in self._queue]
            try:
                windows: Mapping[str, Window] = yield StoreCall("windows", (names,))
            except StoreUnavailableError:
                windows = {}  # the order is a preference; the take below fails closed
            ordered = self._by_windows([c for c, _, _ in self._queue], windows)
            self._queue = deque((c, 0.0, 1) for c in ordered)
        while self._queue:
            if self.deadline is not None and self.deadline.passed():
                self.expired = True
                return None
            candidate, wait, number = self._queue.popleft()
            name = candidate.name
            self._sends += 1
            token = f"{self.id}.{self._sends}"
            probe = False
            if self._health is not None:
                # A retry is checked as of when it will be sent, after its wait.
                try:
                    claim = yield from self._health.admit(name, self._clock.now() + wait, token)
                except StoreDeadline:
                    # The claim's outcome is unknown: give back a probe it may have taken.
                    yield from self._health.release(name, token)
                    raise
                if isinstance(claim, Skip):
                    self._passed_over(claim)
                    continue
                probe = claim is True
            slot = None
            if self._rates is not None and self._rates.applies(candidate):
                slot = self._slot_tokens(candidate)
                try:
                    full = yield from self._rates.admit(candidate, token, slot)
                except StoreDeadline:
                    # The take's outcome is unknown: give back what it may have taken.
                    yield from self._give_back(name, None, token, True)
                    raise
                if full is not None:
                    if self._health is not None:
                        yield from self._health.release(name, token)
                    self._passed_over(full)
                    continue
            held = None
            if self._ledger is not None and self._facts is not None:
                admitted = yield from self._ledger.admit(candidate, self._facts)
                if isinstance(admitted, Skip):
                    if self._health is not None:
                        yield from self._health.release(name, token)
                    if slot is not None and self._rates is not None:
                        yield from self._rates.finish(name, token, None)
                    self._passed_over(admitted)
                    continue
                held = admitted
            timeout = self._timeout
            if self.deadline is not None:
                left = self.deadline.left() - wait
                if left <= 0:
                    yield from self._give_back(name, held, token, slot is not None)
                    self.expired = True
                    return None
                # The router holds the deadline itself (cancelling, or abandoning a sync
                # worker), so LiteLLM is given the deadline's length, not the time left:
                # LiteLLM keys its cached HTTP client by `timeout`, and a value that changed
                # on every call built a new client and connection for each one.
                length = self.deadline.seconds
                timeout = length if timeout is None else min(timeout, length)
            self._tried_in_round = True
            self._attempts += 1
            if self._frame is not None:
                self._frame(
                    AttemptStarted(
                        self.id, self.group, candidate.route, self._attempts, number, probe
                    )
                )
            return Send(
                candidate,
                self._clock.now() + wait,
                held,
                wait,
                timeout,
                number,
                probe,
                token,
                slot,
                self._attempts,
            )
        return None

    def _slot_tokens(self, candidate: Candidate) -> int:
        """The tokens a rate slot takes: what the provider counts on arrival (see
        `bounds.counted_tokens`)."""
        if self._facts is None:
            return 0
        return counted_tokens(self._facts, candidate.sent_cap, candidate.choices)

    def _give_back(
        self, route: str, held: Reservation | None, token: str, slot: bool
    ) -> Steps[None]:
        if held is not None and self._ledger is not None:
            yield from self._ledger.release(held)
        if self._health is not None:
            yield from self._health.release(route, token)
        if slot and self._rates is not None:
            yield from self._rates.finish(route, token, None)

    def _end_slot(self, send: Send, tokens: int | None) -> Steps[None]:
        """The attempt's rate slot keeps `tokens` (billed), or is given back (None)."""
        if send.slot_tokens is not None and self._rates is not None:
            yield from self._rates.finish(send.route.name, send.token, tokens)

    def _billed(self, send: Send, usage: Usage | None) -> int | None:
        return usage.prompt + usage.completion if usage is not None else send.slot_tokens

    # -- waiting for capacity ---------------------------------------------------------------
    def capacity_wait(self) -> float | None:
        """Seconds to wait before asking the routes again, or None not to wait.

        Only with `wait_for_capacity`, only when nothing was sent since the last wait, and
        only when every route passed over was full (its rate window, or a budget held by
        calls in flight, which may fit once they settle): until the earliest slot frees,
        never past the deadline.
        """
        if not self._wait_for_capacity or self._answered or self._stop or self.expired:
            return None
        if self._tried_in_round or not self._round:
            return None
        waits: list[float] = []
        for skip in self._round:
            if skip.check is Check.RATE_LIMIT and math.isfinite(skip.detail["frees_in"]):
                waits.append(float(max(skip.detail["frees_in"], skip.detail["closed_for"], 0.01)))
            elif skip.check is Check.BUDGET and skip.detail.get("may_fit"):
                waits.append(self._poll)
            else:
                return None
        wait = min(waits)
        if self.deadline is not None:
            left = self.deadline.left()
            if left <= 0:
                return None
            wait = min(wait, left)
        return wait

    def waited(self, seconds: float) -> None:
        """The driver waited `seconds` for capacity: say so, and consider the routes again."""
        why = "; ".join(f"{s.route}: {s.reason}" for s in self._round)
        self._record(Waited(seconds, why))
        self._poll = min(self._poll * 2, 1.0)
        self._round, self._tried_in_round = [], False
        self._queue = deque((c, 0.0, 1) for c in self._eligible)
        self._reorder = True

    # -- outcomes --------------------------------------------------------------------------
    def answered(
        self, send: Send, usage: Usage | None = None, *, final: bool = True
    ) -> Steps[None]:
        """The route answered. For a stream (`final=False`) its first chunk arrived, and
        its cost is settled later by `finished`."""
        cost = (yield from self._settle(send, usage)) if final else None
        if final:
            yield from self._end_slot(send, self._billed(send, usage))
        if self._health is not None:
            yield from self._health.succeeded(send.route.name, send.token)
        elapsed = self._since(send)
        if self._on_result is not None:
            self._on_result(send.route.name, "answered", elapsed)
        attempt = Attempt(
            send.route.name,
            "answered",
            elapsed=elapsed,
            wait=send.wait,
            cost=cost,
            usage=usage,
            streamed=not final,
            group=self.group,
            journey_id=self.id,
        )
        # A stream's attempt is reported to observers once it ends, complete with its cost.
        if final:
            self._record(attempt)
        else:
            self._steps.append(attempt)
        self._answered = send.candidate

    def finished(self, send: Send, usage: Usage | None) -> Steps[None]:
        """A stream that answered has ended or been closed: settle what it cost."""
        cost = yield from self._settle(send, usage)
        yield from self._end_slot(send, self._billed(send, usage))
        self._replace_answer(send, lambda a: replace(a, cost=cost, usage=usage))
        for step in reversed(self._steps):
            if isinstance(step, Attempt) and step.route == send.route.name and step.ok:
                self._emit(step)
                break

    def failed(self, send: Send, fault: Fault) -> Steps[None]:
        """The route failed with `fault` before answering: release, and decide what next.

        A fault that never left this process (`fault.sent` is False) is no attempt: it is
        recorded as "not sent", the breaker is not told, and the request stops when the
        fault is about the request (every route would fail alike) or moves on when it is
        about the route (a missing key).
        """
        yield from self._release(send)
        self._last_fault = fault
        # A request the provider received counts in its window, even refused.
        yield from self._end_slot(send, send.slot_tokens if fault.sent else None)
        if (
            fault.kind is FaultKind.RATE_LIMITED
            and fault.retry_after
            and self._rates is not None
            and (send.route.rpm or send.route.tpm)
        ):
            yield from self._rates.close(send.route.name, fault.retry_after)
        if not fault.sent:
            if self._health is not None:
                yield from self._health.release(send.route.name, send.token)
            self._record(
                Skip(
                    send.route.name,
                    Check.SEND,
                    send.route.redact(fault.message),
                    {"about": fault.kind.about},
                )
            )
            if not fault.kind.falls_through:
                self._stop = fault
            return
        then = self._after(send, fault)
        self._record(self._failure(send, fault, then))
        yield from self._fault_seen(send, fault)

    def abandoned(self, send: Send) -> None:
        """The deadline passed while a sync call was still running on its worker.

        Its reservation stays held and its health unrecorded: `settle_late` settles both
        when the abandoned call ends.
        """
        self.expired = True
        fault = Fault(FaultKind.TIMEOUT, None, "the request's deadline passed during this call")
        self._last_fault = fault
        self._record(self._failure(send, fault, "abandoned at the deadline; settles when it ends"))

    def cancelled(self, send: Send, *, sent: bool) -> Steps[None]:
        """The caller cancelled the request during this attempt (an async task cancelled).

        Once the request was sent the provider may generate and bill it, so the call is
        charged its reservation, counted as unmeasured; before that it is released. The
        breaker learns nothing either way, and a claimed probe is given back.
        """
        self.expired = True
        cost = (yield from self._settle(send, None)) if sent else None
        yield from self._end_slot(send, send.slot_tokens if sent else None)
        if not sent:
            yield from self._release(send)
        if self._health is not None:
            yield from self._health.release(send.route.name, send.token)
        then = "charged its reservation" if sent else "released; nothing was sent"
        self._record(
            replace(self._failure(send, _CANCELLED, then, cost), outcome="cancelled", status=None)
        )

    def settle_late(self, send: Send, usage: Usage | None, fault: Fault | None) -> Steps[None]:
        """An abandoned call ended: charge or release it, and tell the breaker."""
        yield from self._end_slot(send, self._billed(send, usage))
        if fault is None:
            yield from self._settle(send, usage)
            if self._health is not None:
                yield from self._health.succeeded(send.route.name, send.token)
        else:
            yield from self._release(send)
            if self._health is not None:
                yield from self._health.failed(
                    send.route.name, _redacted(send, fault), self._clock.now(), send.token
                )

    def _fault_seen(self, send: Send, fault: Fault) -> Steps[None]:
        if self._health is not None:
            yield from self._health.failed(
                send.route.name, _redacted(send, fault), self._clock.now(), send.token
            )
        if self._on_result is not None:
            self._on_result(send.route.name, fault.kind.value, self._since(send))
        self._last_fault = fault

    def _after(self, send: Send, fault: Fault) -> str:
        """What follows a failure: a retry, the next route, or a stop; queues a retry."""
        if not fault.kind.falls_through:
            self._stop = fault
            if fault.kind.about == "request":
                return "stopped: another model would fail alike"
            return "stopped: a refusal is not shopped around"
        if self.deadline is not None and self.deadline.passed():
            self.expired = True
            return "deadline passed"
        policy = self._retry(send.route) if self._retry is not None else None
        wait = policy.wait(fault, send.number, self._rng) if policy is not None else None
        if wait is not None:
            if self.deadline is not None and wait >= self.deadline.left():
                return f"retry not taken: waiting {wait:.2f} s would pass the deadline"
            self._queue.appendleft((send.candidate, wait, send.number + 1))
            return f"retry in {wait:.2f} s"
        return "next route" if self._queue else "no route left"

    def failed_after_answer(
        self, send: Send, fault: Fault, usage: Usage | None = None, *, restart: bool = False
    ) -> Steps[bool]:
        """A stream that had started failed later: recorded, and the answer is void.

        The provider generated (and will bill) part of a reply, so the call is charged: by
        its usage when known, else at its reservation, counted as unmeasured. The failure
        replaces the attempt's "answered" record: one request, one attempt. With `restart`
        the request goes on to the next route when there is one; returns whether it does.
        """
        cost = yield from self._settle(send, usage)
        yield from self._end_slot(send, self._billed(send, usage))
        if self._health is not None:
            yield from self._health.failed(
                send.route.name, _redacted(send, fault), self._clock.now(), send.token
            )
        self._answered = None
        self._last_fault = fault
        restarting = restart and fault.kind.falls_through and bool(self._queue)
        if not restarting:
            self._stop = fault
        then = "restarted from scratch on the next route" if restarting else "raised in the stream"
        failed = replace(self._failure(send, fault, then, cost), usage=usage, streamed=True)
        self._emit(failed)
        if not self._replace_answer(send, lambda _: failed):
            self._steps.append(failed)
        return restarting

    def _failure(self, send: Send, fault: Fault, then: str, cost: Money | None = None) -> Attempt:
        return Attempt(
            send.route.name,
            fault.kind.value,
            status=fault.status,
            error=send.route.redact(fault.message),
            elapsed=self._since(send),
            wait=send.wait,
            then=then,
            cost=cost,
            group=self.group,
            journey_id=self.id,
        )

    def _replace_answer(self, send: Send, change: Callable[[Attempt], Attempt]) -> bool:
        for i in range(len(self._steps) - 1, -1, -1):
            step = self._steps[i]
            if isinstance(step, Attempt) and step.route == send.route.name and step.ok:
                self._steps[i] = change(step)
                return True
        return False

    def _settle(self, send: Send, usage: Usage | None) -> Steps[Money | None]:
        """Settle the attempt; what it was charged (its reservation when no usage came, so
        the journey's costs add up to what the budget says was spent)."""
        if send.held is not None and self._ledger is not None:
            charged, _ = yield from self._ledger.settle(send.held, usage)
            return charged
        price, table = send.candidate.price, send.route.prices
        if price is None or usage is None or table is None:
            return None
        return Money(price.cost(usage), table.currency)

    def _release(self, send: Send) -> Steps[None]:
        if send.held is not None and self._ledger is not None:
            yield from self._ledger.release(send.held)

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
            id=self.id,
        )

    def ended(self, error: BaseException | None = None) -> None:
        """The caller has the answer (`error` None) or the error: tell observers, once."""
        if not self._ended and self._frame is not None:
            self._ended = True
            self._frame(RequestEnded(self.journey, None if error is None else type(error).__name__))

    def error(self, last: BaseException | None) -> BaseException:
        """The exception to raise when the request ends unanswered.

        After real attempts: the last provider's own exception `last`, with the journey
        attached as `.journey` and in its notes (a refusal becomes `RefusedError` from it).
        With nothing sent: `OverBudgetError` when the budget refused a route, else
        `NoRouteError`, naming what each route lacked.
        """
        journey = self.journey
        stop = self._stop
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
        if self.expired and self._answered is None and self.deadline is not None:
            elapsed = self.deadline.elapsed()
            error = DeadlineExceededError(
                f"the deadline of {self.deadline.seconds:g} s passed after {elapsed:.2f} s "
                f"with no answer. {journey}",
                elapsed=elapsed,
                journey=journey,
            )
            error.__cause__ = last
            return error
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
        resting = [s for s in journey.skips if s.check is Check.BREAKER]
        limited = [s for s in journey.skips if s.check is Check.RATE_LIMIT]
        if limited and not last:
            retry_after = min(
                [max(float(s.detail["frees_in"]), float(s.detail["closed_for"])) for s in limited]
                + [float(s.detail.get("rest_left", 0.0)) for s in resting]
            )
            return RateLimitedError(
                f"every route that could serve group {self.group!r} is at its rate limit; "
                f"the first has room in {retry_after:.1f} s; nothing was sent: {reasons}",
                retry_after=retry_after,
                journey=journey,
            )
        if resting and not last:
            wakes_in = min(float(s.detail.get("rest_left", 0.0)) for s in resting)
            return AllRestingError(
                f"every route that could serve group {self.group!r} is resting; the first "
                f"wakes in {wakes_in:.1f} s: {reasons}",
                wakes_in=wakes_in,
                journey=journey,
            )
        return NoRouteError(message, journey=journey)


def _redacted(send: Send, fault: Fault) -> Fault:
    """The fault with the route's secrets taken out of its text, for the health record."""
    return replace(fault, message=send.route.redact(fault.message))
