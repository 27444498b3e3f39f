"""The express lane: the common call, answered by its group's first route, in few steps.

Most calls go to a group whose routes all serve them, are sent to the first route, and
are answered. When nothing of the request is ordered or rate-limited (the listed order, no
`rpm`/`tpm`, no deadline, no stream, no observer that frames requests) and the store
answers in this process, the plan's work for such a call is: read the route's health,
hold the budget's worst case when a budget covers the call (`lane_hold`), send, and on the
answer record the breaker's success, the cost (the route's prices, or what the budget
charged) and the attempt. The lane does exactly that, and nothing else: no plan, no
generators, no queue (`Planner.lane` says which calls may take it). A plain chat call
(`drive.plain`) reaches its group's lane from its keywords in one pass
(`Planner.express`): no `Call` is made unless the plan takes it over.

Anything that is not the common answer goes to the plan, which keeps every rule: a route
whose record is not closed, or a call the budget refuses, is planned from scratch (the
lane took nothing); a failure, a cancellation, or an answer LiteLLM does not say it sent
(a mock, its cache, or any way nobody listed) is handed to a plan that adopts the attempt
as its first (`Plan.adopt`), with its hold, and goes on from there as for any attempt of
its own. The records are the plan's: the same `Attempt`, the same breaker write by the
same id, the same journey.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..core.checkpoint import Checkpoint
from ..core.deferred import LISTED, Counts, answered, as_usage
from ..core.gate import Send
from ..core.journey import Routed, journey_of, routed_of
from ..endpoints import Endpoint, reading
from ..endpoints.reading import usage_of
from ..ground.clock import Clock, MonotonicClock
from ..ground.ids import new_id
from ..ground.money import Money, Usage
from ..ground.outcome import Wire
from ..ground.records import Skip
from ..policies.breaker import Breaker, HealthBook
from ..policies.candidate import Candidate
from ..policies.hedge import Hedge
from ..policies.requirements import Requirements
from ..policies.retry import Retry
from ..state.store import FRESH, Store, perform
from . import calls, lane_hold
from .lane_hold import Facts
from .prompt import Prompt
from .seam import raised, transport

if TYPE_CHECKING:
    from ..core.plan import Plan
    from ..policies.scopes import Budgets
    from .calls import OnRestart

__all__ = ["Call", "Lane", "takes_lane"]


@dataclass(kw_only=True, slots=True)
class Call:
    """One call as `Planner.prepare` read it: checked, with what it needs and where it
    may go (its group's routes, sifted by those needs), before anything is held."""

    endpoint: Endpoint
    group: str
    candidates: tuple[Candidate, ...]
    needs: Requirements
    call_kwargs: dict[str, Any]
    """The keyword arguments LiteLLM is to get (the router's own taken out)."""
    sifted: tuple[Sequence[Candidate], Sequence[Skip]]
    seconds: float | None
    """The request's deadline, in seconds, when it has one."""
    timeout: float | None
    """The call's `timeout=` when it is a number of seconds (it caps each attempt's)."""
    retry: Retry | None
    wait: bool
    previous: str | None
    """The Responses `previous_response_id` the call continues, when it does."""
    lane: Lane | None = None
    """The express lane of the call's group and needs, when there is one (`Planner.lane`
    says whether this call takes it)."""
    hedge: Hedge | None = None
    own_hedge: bool = False
    """Whether the call gave its own `hedge=` (else its group's applies)."""
    scope: Mapping[str, str] | None = None
    """Who the call is for (its `scope=`: a server's key and team), for its budgets."""
    prompt: Prompt | None = field(default=None, compare=False, repr=False)
    """The call's prompt as its checks measure it, once (`drive.prompt`): made by the first
    check that reads it; a cache, not part of what the call is."""

    def measure(self) -> Prompt:
        """The call's prompt, measured once for every check (see `prompt`)."""
        if self.prompt is None:
            self.prompt = Prompt(self.endpoint, self.call_kwargs)
        return self.prompt


def takes_lane(first: Candidate, needs: Requirements) -> bool:
    """Whether calls with `needs` to a group whose first route is `first` may take the lane
    (the group's other conditions aside): not a Responses call, which may continue a
    conversation pinned to its route, and not a route with a first-token or stall limit,
    which the plan's drivers hold."""
    route = first.route
    return (
        needs.endpoint != "responses"
        and route.first_token_timeout is None
        and route.stall_timeout is None
    )


class Planning(Protocol):
    """What a lane asks of its planner (`Planner`) when the plan takes a call over."""

    def build(self, call: Call, id: str | None = None) -> Plan: ...

    def plain_call(self, group: str, call_kwargs: dict[str, Any]) -> Call: ...


class Lane:
    """The express lane to one route (the first of its group for the calls that take it):
    what the common call needs of the router, read once. A lane serves one group and one
    set of needs of one endpoint (its `Planner` keys lanes by all three)."""

    __slots__ = (
        "_budgets", "_counts", "_facts", "_fresh", "_id", "_judge", "_kept", "_name", "_now", "book",
        "candidate", "emit", "endpoint", "group", "needs", "store",
    )

    def __init__(
        self,
        candidate: Candidate,
        book: HealthBook | None,
        store: Store,
        clock: Clock,
        emit: Callable[[object], None],
        group: str,
        needs: Requirements,
        endpoint: Endpoint,
        answered: set[str] | None = None,
        budgets: Budgets | None = None,
        facts: Facts | None = None,
    ) -> None:
        self.candidate = candidate
        # The router's routes that have answered (`Latencies.answered`): this one's answers
        # count, so a connection the server closes under its next call is known kept.
        self._kept = answered if answered is not None else set()
        self.book = book
        self.store = store
        self.emit = emit
        self.group = group
        self.needs = needs
        self.endpoint = endpoint
        # What the route is kept under and shown as, read once: every call reads both. The
        # process's monotonic clock is read through `time.monotonic` itself: every call
        # reads it twice, and a frame of Python costs microseconds after a LiteLLM call.
        self._id, self._name = candidate.id, candidate.name
        self._now = time.monotonic if type(clock) is MonotonicClock else clock.now
        # The common reply's two counts are read in one step when the endpoint reads usage
        # as chat does; any other endpoint's reading is its own.
        self._counts = endpoint.usage is usage_of
        # `Breaker.admit` admits a closed record unchanged, so a route with no record at all
        # (the healthy one) needs no asking; a breaker of another kind is always asked.
        self._fresh = book is not None and type(book.breaker).admit is Breaker.admit
        # Under the on-device floor every attempt is checked at the wire (where LiteLLM
        # really sends it, through which proxy); the checkpoint holds nothing per call.
        self._judge = Checkpoint(candidate, floor=True) if needs.on_device else None
        # A budgeted call is held before it is sent (`lane_hold`): `facts` measures it.
        self._budgets, self._facts = budgets, facts

    def call(
        self, call_kwargs: dict[str, Any], timeout: float | None, call: Call | None,
        planner: Planning, restart: bool, on_restart: OnRestart,
    ) -> Routed[Any]:
        """Send a call to the route and return its answer, as `calls.call` would.

        `call_kwargs` are what LiteLLM is to get, `timeout` the call's own in seconds;
        `call` is the call as `Planner.prepare` read it, or None for a plain chat call
        (`Planner.express`), whose `Call` is made only if the plan takes over."""
        trip, sent = self._trip(timeout, call_kwargs, call), None
        if trip is not None:
            try:
                result = transport.call(
                    self.endpoint.function, self.candidate.route, call_kwargs, self.group,
                    timeout, request_id=trip.id, attempt=1, wire=trip,
                )
            except BaseException as error:
                sent = trip.sent(None, error)
            else:
                kept = self._settled(trip, result)
                if not isinstance(kept, calls.Sent):
                    return kept
                sent = kept
        # Outside the except block: what the plan raises next is not chained to this error.
        call, plan = self._plan(call_kwargs, call, planner, trip, sent)
        return calls.call(plan, call.endpoint, call.call_kwargs, restart, on_restart, sent)

    async def acall(
        self, call_kwargs: dict[str, Any], timeout: float | None, call: Call | None,
        planner: Planning, restart: bool, on_restart: OnRestart,
    ) -> Routed[Any]:
        """The async twin of `call` (a cancellation is handed over too: the plan records
        it and re-raises it)."""
        trip, sent = self._trip(timeout, call_kwargs, call), None
        if trip is not None:
            try:
                result = await transport.acall(
                    self.endpoint.afunction, self.candidate.route, call_kwargs, self.group,
                    timeout, request_id=trip.id, attempt=1, wire=trip,
                )
            except BaseException as error:
                sent = trip.sent(None, error)
            else:
                kept = self._settled(trip, result)
                if not isinstance(kept, calls.Sent):
                    return kept
                sent = kept
        call, plan = self._plan(call_kwargs, call, planner, trip, sent)
        return await calls.acall(plan, call.endpoint, call.call_kwargs, restart, on_restart, sent)

    def _settled(self, trip: _Trip, result: Any) -> Routed[Any] | calls.Sent:
        """The answer's records when the lane keeps it, else the attempt for the plan: an
        answer LiteLLM made itself, or one that says nothing (a 200 with no choices, a
        provider's fault)."""
        empty = self.endpoint.empty
        if empty is not None and empty(result):
            return trip.sent(None, raised.empty_answer(self.candidate.route))
        routed = self._answered(trip, result)
        return routed if routed is not None else trip.sent(result, None)

    def _trip(
        self, timeout: float | None, call_kwargs: dict[str, Any], call: Call | None
    ) -> _Trip | None:
        """The lane's attempt, when the breaker admits the route as the gate's one-step
        admission does (its record closed, admitted unchanged; nothing is taken either way)
        and, for a budgeted call, the budget holds its worst case (`lane_hold`); None
        leaves the call to the plan, with nothing held."""
        started, id = self._now(), new_id()
        if self._budgets is not None and self._facts is not None:
            # The admission reads the route's record itself, in the same store operation.
            held = lane_hold.hold(
                self._budgets, self._facts, self.book, self.store, self.candidate, self.endpoint,
                self.group, call_kwargs, call.scope if call is not None else None,
                call.measure() if call is not None else None, f"{id}.1", started, self.needs.on_device,
            )
            if held is not True:  # True: no budget covers the call
                return None if held is False else _Trip(self.candidate, id, started, timeout, held.judge, held)
        if self.book is not None:
            h = self.store.health(self._id)
            if not (h is FRESH and self._fresh) and not (
                h.state == "closed" and self.book.admits_as_is(h, started)
            ):
                return None
        return _Trip(self.candidate, id, started, timeout, self._judge)

    def _plan(
        self,
        call_kwargs: dict[str, Any],
        call: Call | None,
        planner: Planning,
        trip: _Trip | None,
        sent: calls.Sent | None,
    ) -> tuple[Call, Plan]:
        """The call and its plan, holding the lane's attempt as its first when one was
        sent."""
        if call is None:
            call = planner.plain_call(self.group, call_kwargs)
        plan = planner.build(call, trip.id if trip is not None else new_id())
        if sent is not None:
            plan.adopt(sent.send)
        return call, plan

    def _answered(self, trip: _Trip, result: Any) -> Routed[Any] | None:
        """The answer's records, as the plan's `answered` makes them. An answer LiteLLM
        made itself (a mock, its cache: `Wire.local`) is the plan's to settle (None); any
        other came from the provider, as the plan reads it too. (LiteLLM's embedding path
        takes `logger_fn` and never calls it: waiting for `left` sent every embedding
        through the lane and then the plan, to the same records.)"""
        usage: Usage | Counts | None
        if self._counts:  # chat's reading: the common reply in one step
            hidden, trip.cached, usage, model = reading.reply_of(result)
        else:
            hidden, usage, model = reading.hidden_of(result), None, reading.model_of(result)
            trip.cached = reading.hit_in(hidden)
        if trip.local:
            return None
        self._kept.add(self._id)
        id, candidate, endpoint = trip.id, self.candidate, self.endpoint
        if usage is None:  # the endpoint's whole reading of any reply but the common one
            usage = endpoint.usage(result)
        cost: Money | None = LISTED
        if trip.hold is not None:
            # Held: settled as the plan's gate settles (the charge and the breaker's success
            # in one store operation), and the attempt records what the budget charged.
            usage = as_usage(usage)
            cost = perform(self.store, trip.hold.gate.conclude(trip.send(), usage, None))  # no rate slot
        elif self.book is not None and self.store.health(self._id) is not FRESH:
            # A success leaves a fresh record as it is (`Breaker.succeeded`): written only
            # when the route has something to forget. Read then skipped, it is as if this
            # success came before whatever the route meets next.
            token = f"{id}.1"
            change, op, made = self.book.succeeding(self._id, token, self._name)
            self.store.update_health(self._id, change, token=token, op=op)
            made()
        elapsed = max(0.0, self._now() - trip.started)
        # The plan's record (`outcomes.answer`), its fields made when first read.
        attempt = answered(candidate, self.group, id, endpoint.name, elapsed, usage, model, cost)
        self.emit(attempt)
        journey = journey_of(self.group, self.needs, (attempt,), self._name, elapsed, id)
        if endpoint.incomplete is not None:
            calls.served(endpoint, result, candidate.route)
        if type(hidden) is not dict:  # a text completion's HiddenParams model, or none
            return calls.stamped(result, candidate.route, journey, hidden)
        hidden["policy_router"] = journey
        return routed_of(result, candidate.route, journey)


class _Trip(Wire):
    """The lane's one attempt: its request id, when it started, its timeout, what it holds
    (a budgeted call's `Hold`), and (being its own `Wire`) whether its request left."""

    __slots__ = ("candidate", "hold", "id", "started", "timeout")

    def __init__(
        self, candidate: Candidate, id: str, started: float, timeout: float | None,
        judge: Checkpoint | None = None, hold: lane_hold.Hold | None = None,
    ) -> None:
        Wire.__init__(self, judge)
        self.candidate, self.id, self.started, self.timeout = candidate, id, started, timeout
        self.hold = hold

    def send(self) -> Send:
        """The attempt as the gate admitted it: a closed record (no probe, no slot), under
        the token `{id}.1`, holding its reservation when it has one."""
        return Send(
            candidate=self.candidate, started=self.started, held=self.hold.held if self.hold is not None else None, wait=0.0,
            timeout=self.timeout, number=1, probe=False, token=f"{self.id}.1", slot_tokens=None, attempt=1, wire=self,
        )

    def sent(self, result: Any, error: BaseException | None) -> calls.Sent:
        """The attempt as the plan adopts it (`send`), with how it ended."""
        return calls.Sent(self.send(), result, error)
