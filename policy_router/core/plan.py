"""The decision core: what to try next, and what an outcome means. Pure; no I/O.

A `Plan` is one request's decisions. The drivers (sync, async, streams) ask it `next()`,
which answers "send to this route" or "nothing more to try"; they send, and tell it the
outcome (`answered` or `failed` with a classified `Fault`). It never calls LiteLLM and never
reads the time except through the injected clock, so every policy is tested here without
a network, and the drivers cannot disagree about policy because they hold none.

Even the store is reached by asking: the methods that reserve, settle or record health are
`Steps` generators that yield `StoreCall`s. A driver runs them with `plan.run(...)` (sync)
or `await aperform(plan.store, ...)` (async); see `state.store`.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..ground.clock import Clock
from ..ground.errors import StoreUnavailableError
from ..ground.ids import new_id
from ..ground.money import Usage
from ..ground.outcome import Fault
from ..ground.records import Skip
from ..ground.route import Route
from ..policies import continuity
from ..policies.budget import Ledger, RequestFacts
from ..policies.candidate import Candidate
from ..policies.hedge import Hedge, HedgeShares, Latencies
from ..policies.order import Arrange
from ..policies.requirements import Requirements
from ..state.memory import InMemoryStore
from ..state.store import Health, Steps, Store, StoreCall, StoreDeadline, perform
from . import endings
from .capacity import CapacityWait
from .checkpoint import wire_for
from .checks import sift
from .course import Course
from .events import AttemptStarted, RequestEnded, RequestStarted
from .gate import Admitted, Gate, Send
from .hedging import Hedging
from .journey import Journey, journey_of
from .outcomes import Outcomes
from .timeouts import attempt_timeout
from .trail import Trail
from .unanswered import unanswered

if TYPE_CHECKING:
    from ..ground.deadline import Deadline
    from ..policies.breaker import HealthBook
    from ..policies.limits import RateBook
    from ..policies.retry import Retry
    from ..state.windows import Window

__all__ = ["Plan"]

T = TypeVar("T")

# Jitter for retry waits, shared: seeding a Random for every plan cost ~14 us a request,
# and jitter needs no stream of its own (Random's methods are safe across threads).
_JITTER = random.Random()


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
        ordering: Arrange | None = None,
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
        secrets: tuple[str, ...] | None = None,
        call: Mapping[str, Any] | None = None,
        on_dispatch: Callable[[str, int], None] | None = None,
        continues: str | None = None,
        id: str | None = None,
        hedge: Hedge | None = None,
        latencies: Latencies | None = None,
        shares: HedgeShares | None = None,
    ) -> None:
        self.group = group
        self.operation = operation
        self.id = id or new_id()
        self.trail = Trail(group, self.id, operation, candidates, emit=emit, secrets=secrets, call=call)
        self.store: Store = store or (
            ledger.store if ledger else health.store if health else InMemoryStore()
        )
        self.needs = needs
        self.deadline = deadline
        self._clock = clock
        self._ledger = ledger
        self._facts = facts
        self._timeout = timeout
        self._on_dispatch = on_dispatch
        self._started = clock.now()
        self._sends = 0
        self._attempts = 0
        self._ended = False
        # The records that frame a request (events.py) go to `frame`, when an observer
        # wants them; the router leaves it None otherwise, which costs nothing per call.
        self._frame = frame
        if frame is not None:
            frame(RequestStarted(journey_id=self.id, group=group, operation=operation, needs=needs, settings=settings or {}))
        eligible, skips = sifted if sifted is not None else sift(candidates, needs)
        for skip in skips:
            self.trail.record(skip)
        eligible = ordering(eligible) if ordering else eligible
        self.course = Course(eligible=eligible, queue=deque((c, 0.0, 1) for c in eligible))
        # An ordering that reads health (or rate windows) waits for the first `next()`,
        # which fetches every record in one store call rather than one call per route.
        self._by_health = by_health
        self._by_windows = by_windows
        # A Responses call continuing a conversation: pinned, at the first `next()`, to the
        # route that made the response it continues (one store read).
        self._continues = continues
        self._gate = Gate(health, rates, ledger, facts, self.store)
        self.capacity = CapacityWait(wait_for_capacity)
        self.outcomes = Outcomes(
            self.course, self.trail, self._gate, clock=clock, deadline=deadline, retry=retry,
            rng=rng or _JITTER, on_result=on_result, latencies=latencies,
        )
        self._adopted: Send | None = None
        self._hedging = Hedging(hedge, group, latencies, shares) if hedge is not None else None

    @property
    def observed(self) -> bool:
        """Whether an observer follows this request (and wants, say, a stream's usage)."""
        return self._frame is not None

    @property
    def clock(self) -> Clock:
        return self._clock

    def _passed_over(self, skip: Skip) -> None:
        self.capacity.passed_over(skip)
        self.trail.record(skip)

    def adopt(self, send: Send) -> None:
        """Take `send` as this request's first attempt, already admitted and sent: the
        express lane (`drive.express`) sent it to the plan's first route, admitted as the
        gate admits a closed record (no probe, no slot; its hold, if any, the plan's to
        settle), under the token `f"{id}.1"`. The next `next()` returns it, so a driver
        tells the plan its outcome as for any attempt the plan made."""
        candidate, _, _ = self.course.queue.popleft()
        if candidate is not send.candidate or send.token != f"{self.id}.1":
            raise ValueError("adopt() takes the express lane's send to the plan's first route")
        self._sends = self._attempts = 1
        self.capacity.sent()
        self._started = min(self._started, send.started)  # the request began with the send
        self._adopted = send

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
        if self._adopted is not None:
            adopted, self._adopted = self._adopted, None
            return adopted
        if self.course.over:
            return None
        try:
            return (yield from self._next())
        except StoreDeadline:
            self.course.expired = True
            return None

    def _next(self) -> Steps[Send | None]:
        course = self.course
        if self._continues is not None:
            previous, self._continues = self._continues, None
            made = yield from continuity.recall(previous)
            kept, skips = continuity.pinned([c for c, _, _ in course.queue], previous, made)
            for skip in skips:
                self.trail.record(skip)
            course.queue = deque(e for e in course.queue if e[0] in kept)
        if self._by_health is not None:
            seen: Mapping[str, Health] = yield StoreCall("all_health")
            ordered = self._by_health([c for c, _, _ in course.queue], seen)
            course.queue = deque((c, 0.0, 1) for c in ordered)
            self._by_health = None
        if self._by_windows is not None and course.reorder:
            # Once per round: a retry queued after a failure keeps its place and its wait.
            course.reorder = False
            names = [c.id for c, _, _ in course.queue]
            try:
                windows: Mapping[str, Window] = yield StoreCall("windows", (names,))
            except StoreUnavailableError:
                windows = {}  # the order is a preference; the take below fails closed
            ordered = self._by_windows([c for c, _, _ in course.queue], windows)
            course.queue = deque((c, 0.0, 1) for c in ordered)
        while course.queue:
            if self.deadline is not None and self.deadline.passed():
                course.expired = True
                return None
            candidate, wait, number = course.queue.popleft()
            self._sends += 1
            token = f"{self.id}.{self._sends}"
            # A retry is checked as of when it will be sent, after its wait.
            admitted = yield from self._gate.admit(candidate, self._clock.now() + wait, token)
            if isinstance(admitted, Skip):
                self._passed_over(admitted)
                continue
            return (yield from self._dispatch(candidate, admitted, token, wait, number))
        return None

    def _dispatch(
        self, candidate: Candidate, admitted: Admitted, token: str, wait: float, number: int
    ) -> Steps[Send | None]:
        """The admitted attempt as the drivers send it: its timeout (the route's limits'
        backstop, the deadline's length), counted, told to the ordering and the observers;
        None when the deadline leaves no time for it (what it holds given back)."""
        probe, slot, held = admitted.probe, admitted.slot, admitted.held
        route = candidate.route
        if self.deadline is not None and self.deadline.left() - wait <= 0:
            yield from self._gate.give_back(candidate.id, held, token, slot is not None)
            self.course.expired = True
            return None
        timeout = attempt_timeout(route, self._timeout, self.deadline)
        self.capacity.sent()
        self._attempts += 1
        if self._on_dispatch is not None:
            self._on_dispatch(candidate.id, self._attempts)  # an ordering told of each send
        if self._frame is not None:
            self._frame(
                AttemptStarted(journey_id=self.id, group=self.group, route=route, attempt=self._attempts, number=number, probe=probe)
            )
        floor = self.needs.on_device
        return Send(
            candidate=candidate, started=self._clock.now() + wait, held=held, wait=wait, timeout=timeout, number=number, probe=probe, token=token,
            slot_tokens=slot, attempt=self._attempts, wire=wire_for(candidate, held, floor, self._ledger, self._facts),
        )

    # -- hedging ----------------------------------------------------------------------------
    @property
    def hedging(self) -> bool:
        """Whether this request may hedge a slow attempt (`Router(hedge=...)`)."""
        return self._hedging is not None

    def hedge_delay(self, send: Send) -> float | None:
        """Seconds to wait on `send` before hedging it, or None when it is not hedged (no
        hedge policy, or no route queued to hedge it with)."""
        return None if self._hedging is None else self._hedging.delay(send, self.course.queue)

    def hedge(self) -> Steps[Send | None]:
        """A second attempt beside one in flight: the next queued route, admitted like any
        (its breaker, its rate window, the budget reserving its worst case beside the
        first's, the deadline). None when none can be sent now: the journey says why, and
        the route stays queued, to be asked if the first attempt fails."""
        hedging = self._hedging
        if hedging is None or self.course.over or not self.course.queue:
            return None
        if self.deadline is not None and self.deadline.passed():
            return None
        candidate, wait, number = self.course.queue[0]
        refused = hedging.take(candidate)
        if refused is not None:
            self.trail.record(refused)
            return None
        self._sends += 1
        token = f"{self.id}.{self._sends}"
        admitted = yield from self._gate.admit(candidate, self._clock.now(), token)
        if isinstance(admitted, Skip):
            hedging.give_back()
            self.trail.record(replace(admitted, reason=f"hedge not sent: {admitted.reason}"))
            return None
        self.course.queue.popleft()
        return (yield from self._dispatch(candidate, admitted, token, wait, number))

    # -- what the drivers tell it (core.outcomes, core.endings, core.capacity) ------------
    def answered(self, send: Send, usage: Usage | None = None, *, final: bool = True, model: str | None = None, made: str | None = None) -> Steps[None]:
        """`send`'s route answered (see `Outcomes.answered`)."""
        return self.outcomes.answered(send, usage, final=final, model=model, made=made)

    def finished(self, send: Send, usage: Usage | None, *, closed: bool = False) -> Steps[None]:
        """A stream that answered ended, or was closed (see `Outcomes.finished`)."""
        return self.outcomes.finished(send, usage, closed=closed)

    def failed(self, send: Send, fault: Fault, error: BaseException | None = None) -> Steps[None]:
        """`send`'s route failed before answering (see `Outcomes.failed`)."""
        return self.outcomes.failed(send, fault, error)

    def failed_after_answer(self, send: Send, fault: Fault, usage: Usage | None = None, *, restart: bool = False, error: BaseException | None = None) -> Steps[bool]:
        """A started stream failed (see `Outcomes.failed_after_answer`); whether it restarts."""
        return self.outcomes.failed_after_answer(send, fault, usage, restart=restart, error=error)

    def abandoned(self, send: Send, then: str = "abandoned at the deadline; settles when it ends") -> None:
        """A sync call left running on its worker (see `endings.abandoned`)."""
        endings.abandoned(self.outcomes, send, then)

    def cancelled(self, send: Send, *, sent: bool) -> Steps[None]:
        """The caller cancelled during `send` (see `endings.cancelled`)."""
        return endings.cancelled(self.outcomes, send, sent=sent)

    def raised(self, send: Send, error: BaseException) -> Steps[None]:  # see `endings.raised`
        return endings.raised(self.outcomes, send, error)

    def gave_up(self, send: Send, fault: Fault) -> Steps[None]:
        """`send`'s own first-token limit passed (see `endings.gave_up`)."""
        return endings.gave_up(self.outcomes, send, fault)

    def settle_late(self, send: Send, usage: Usage | None, fault: Fault | None, *, health: bool = True) -> Steps[None]:
        """An abandoned call ended (see `endings.settle_late`)."""
        return endings.settle_late(self.outcomes, send, usage, fault, health=health)

    def lost(self, send: Send, to: Send, *, running: bool, sent: bool = True) -> Steps[None]:
        """A hedged attempt lost the race to `to` (see `endings.lost`)."""
        return endings.lost(self.outcomes, send, to, running=running, sent=sent)

    def capacity_wait(self) -> float | None:
        """Seconds to wait for capacity before asking the routes again, or None (see
        `CapacityWait.wait`)."""
        return None if self.course.over else self.capacity.wait(self.deadline)

    def waited(self, seconds: float) -> None:
        """The driver waited `seconds` for capacity: say so, and ask the routes again."""
        self.trail.record(self.capacity.waited(seconds))
        self.course.restart()

    # -- the result ------------------------------------------------------------------------
    @property
    def journey(self) -> Journey:
        """The journey so far (a new frozen value each time it is read)."""
        return journey_of(
            self.group,
            self.needs,
            tuple(self.trail.steps),
            self.course.answered.name if self.course.answered else None,
            max(0.0, self._clock.now() - self._started),
            self.id,
        )

    def ended(self, error: BaseException | None = None) -> None:
        """The caller has the answer (`error` None) or the error: tell observers, once."""
        if not self._ended and self._frame is not None:
            self._ended = True
            self._frame(RequestEnded(self.journey, None if error is None else type(error).__name__))

    def scrub(self, error: BaseException) -> BaseException:
        """`error` with every secret the request knows of taken out (see `ground.secrets`):
        its routes', its call's, what its attempts carried on the wire, the environment's."""
        return self.trail.scrubber.scrub(error)

    def error(self, last: BaseException | None) -> BaseException:
        """The exception to raise when the request ends unanswered (see `unanswered`),
        scrubbed of every secret the request knows of, its chain included."""
        if self.course.misuse is not None:  # the caller's own retry decision broke its contract
            self.course.misuse.journey = self.journey  # type: ignore[attr-defined]
            self.course.misuse.__cause__ = last
            return self.scrub(self.course.misuse)
        return self.scrub(unanswered(
            self.journey,
            last,
            stop=self.course.stop,
            last_fault=self.course.last_fault,
            timed_out=self.course.expired and self.course.answered is None,
            deadline=self.deadline,
        ))
