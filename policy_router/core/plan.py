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
from ..ground.outcome import Fault
from ..ground.records import Check, Skip
from ..ground.route import Route
from ..ground.secrets import Scrubber
from ..policies import continuity
from ..policies.budget import Ledger, RequestFacts
from ..policies.candidate import Candidate
from ..policies.hedge import Hedge, HedgeShares, Latencies
from ..policies.order import Arrange
from ..policies.requirements import Requirements
from ..state.memory import InMemoryStore
from ..state.store import Health, Steps, Store, StoreCall, StoreDeadline, perform
from .capacity import Capacity
from .checkpoint import wire_for
from .checks import sift
from .endings import Endings
from .events import AttemptStarted, RequestEnded, RequestStarted
from .gate import Admitted, Gate, Send
from .journey import Attempt, Journey, Waited, journey_of
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
_LONGEST_TIMEOUT = 86_400.0


class Plan(Endings, Capacity):
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
        # Every secret of the group's routes (the planner's `secrets`), of the call's own
        # keywords (`call`), those its attempts put on the wire and the environment holds:
        # taken out of whatever the request records or raises.
        self.scrubber = Scrubber(
            secrets
            if secrets is not None
            else tuple(sorted({x for c in candidates for x in c.route.secrets}, key=len, reverse=True)),
            call,
        )
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
        self._on_dispatch = on_dispatch
        self._rng = rng or _JITTER
        self._started = clock.now()
        self.id = id or new_id()
        self._sends = 0
        self._attempts = 0
        self._ended = False
        self._steps: list[Skip | Attempt | Waited] = []
        # The records that frame a request (events.py) go to `frame`, when an observer
        # wants them; the router leaves it None otherwise, which costs nothing per call.
        self._frame = frame
        if frame is not None:
            frame(RequestStarted(journey_id=self.id, group=group, operation=operation, needs=needs, settings=settings or {}))
        self._candidates = candidates
        self._ids: dict[str, str] | None = None
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
        # A Responses call continuing a conversation: pinned, at the first `next()`, to the
        # route that made the response it continues (one store read).
        self._continues = continues
        self._rates = rates
        self._gate = Gate(health, rates, ledger, facts, self.store)
        self._wait_for_capacity = wait_for_capacity
        self._round: list[Skip] = []  # why routes were passed over since the last wait
        self._tried_in_round = False
        self._poll = 0.05
        self._answered: Candidate | None = None
        self._stop: Fault | None = None
        self._last_fault: Fault | None = None
        self._misuse: BaseException | None = None
        self.expired = False
        self._adopted: Send | None = None
        self._hedge = hedge
        self._latencies = latencies
        self._shares = shares
        self._counted = False  # as a request that may hedge, in `shares`

    @property
    def observed(self) -> bool:
        """Whether an observer follows this request (and wants, say, a stream's usage)."""
        return self._frame is not None

    @property
    def clock(self) -> Clock:
        return self._clock

    def _id_of(self, name: str) -> str:
        if self._ids is None:  # built once a request needs it, not for every plan
            self._ids = {c.name: c.id for c in reversed(self._candidates)}
        return self._ids.get(name, name)

    def _passed_over(self, skip: Skip) -> None:
        self._round.append(skip)
        self._record(skip)

    def adopt(self, send: Send) -> None:
        """Take `send` as this request's first attempt, already admitted and sent: the
        express lane (`drive.express`) sent it to the plan's first route, admitted as the
        gate admits a closed record (nothing held, no probe, no slot), under the token
        `f"{id}.1"`. The next `next()` returns it, so a driver tells the plan its outcome
        as for any attempt the plan made."""
        candidate, _, _ = self._queue.popleft()
        if candidate is not send.candidate or send.token != f"{self.id}.1":
            raise ValueError("adopt() takes the express lane's send to the plan's first route")
        self._sends = self._attempts = 1
        self._tried_in_round = True
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
        if self._answered is not None or self._stop is not None or self.expired:
            return None
        try:
            return (yield from self._next())
        except StoreDeadline:
            self.expired = True
            return None

    def _next(self) -> Steps[Send | None]:
        if self._continues is not None:
            previous, self._continues = self._continues, None
            made = yield from continuity.recall(previous)
            kept, skips = continuity.pinned([c for c, _, _ in self._queue], previous, made)
            for skip in skips:
                self._record(skip)
            self._queue = deque(e for e in self._queue if e[0] in kept)
        if self._by_health is not None:
            seen: Mapping[str, Health] = yield StoreCall("all_health")
            ordered = self._by_health([c for c, _, _ in self._queue], seen)
            self._queue = deque((c, 0.0, 1) for c in ordered)
            self._by_health = None
        if self._by_windows is not None and self._reorder:
            # Once per round: a retry queued after a failure keeps its place and its wait.
            self._reorder = False
            names = [c.id for c, _, _ in self._queue]
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
        timeout = self._timeout
        route = candidate.route
        limits = [x for x in (route.first_token_timeout, route.stall_timeout) if x]
        if limits:
            # The socket's read timeout backs the route's own limits (which the drivers
            # hold to the letter): a worker left reading a stalled stream is let go soon.
            backstop = max(limits) + 1.0
            timeout = backstop if timeout is None else min(timeout, backstop)
        if self.deadline is not None:
            if self.deadline.left() - wait <= 0:
                yield from self._gate.give_back(candidate.id, held, token, slot is not None)
                self.expired = True
                return None
            # The router holds the deadline itself (cancelling, or abandoning a sync
            # worker), so LiteLLM is given the deadline's length, not the time left:
            # LiteLLM keys its cached HTTP client by `timeout`, and a value that changed on
            # every call built a new client and connection for each one. A deadline of
            # years (`1e10`) is no timeout an HTTP client can hold: a day is.
            length = min(self.deadline.seconds, _LONGEST_TIMEOUT)
            timeout = length if timeout is None else min(timeout, length)
        self._tried_in_round = True
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
        return self._hedge is not None

    def hedge_delay(self, send: Send) -> float | None:
        """Seconds to wait on `send` before hedging it, or None when it is not hedged (no
        hedge policy, or no route queued to hedge it with)."""
        if self._hedge is None or not self._queue or self._queue[0][1]:
            return None
        if self._shares is not None and not self._counted:
            self._counted = True
            self._shares.request(self.group)
        return self._hedge.delay(self._latencies or Latencies(), send.route.id)

    def hedge(self) -> Steps[Send | None]:
        """A second attempt beside one in flight: the next queued route, admitted like any
        (its breaker, its rate window, the budget reserving its worst case beside the
        first's, the deadline). None when none can be sent now: the journey says why, and
        the route stays queued, to be asked if the first attempt fails."""
        if self._answered is not None or self._stop is not None or self.expired:
            return None
        if not self._queue or (self.deadline is not None and self.deadline.passed()):
            return None
        candidate, wait, number = self._queue[0]
        share = self._hedge.max_share if self._hedge is not None else 1.0
        if self._shares is not None and not self._shares.take(self.group, share):
            self._record(Skip(candidate.name, Check.HEDGE, (
                f"hedge not sent: hedges reached {share:.0%} of group {self.group!r}'s "
                "recent requests (Hedge.max_share)"), detail={"max_share": share}))
            return None
        self._sends += 1
        token = f"{self.id}.{self._sends}"
        admitted = yield from self._gate.admit(candidate, self._clock.now(), token)
        if isinstance(admitted, Skip):
            if self._shares is not None:
                self._shares.give_back(self.group)
            self._record(replace(admitted, reason=f"hedge not sent: {admitted.reason}"))
            return None
        self._queue.popleft()
        return (yield from self._dispatch(candidate, admitted, token, wait, number))

    # -- the result ------------------------------------------------------------------------
    @property
    def journey(self) -> Journey:
        """The journey so far (a new frozen value each time it is read)."""
        return journey_of(
            self.group,
            self.needs,
            tuple(self._steps),
            self._answered.name if self._answered else None,
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
        return self.scrubber.scrub(error)

    def error(self, last: BaseException | None) -> BaseException:
        """The exception to raise when the request ends unanswered (see `unanswered`),
        scrubbed of every secret the request knows of, its chain included."""
        if self._misuse is not None:  # the caller's own retry decision broke its contract
            self._misuse.journey = self.journey  # type: ignore[attr-defined]
            self._misuse.__cause__ = last
            return self.scrub(self._misuse)
        return self.scrub(unanswered(
            self.journey,
            last,
            stop=self._stop,
            last_fault=self._last_fault,
            timed_out=self.expired and self._answered is None,
            deadline=self.deadline,
        ))
