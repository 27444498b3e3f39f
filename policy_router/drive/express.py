"""The express lane: the common call, answered by its group's first route, in few steps.

Most calls go to a group whose routes all serve them, are sent to the first route, and
are answered. When nothing of the request is held or ordered (no budget, no rate limits,
the listed order, no deadline, no stream, no observer that frames requests) and the store
answers in this process, the plan's work for such a call is: read the route's health,
send, and on the answer record the breaker's success, the cost at the route's prices and
the attempt. The lane does exactly that, and nothing else: no plan, no generators, no
queue (`Planner.lane` says which calls may take it).

Anything that is not the common answer goes to the plan, which keeps every rule: a route
whose record is not closed is planned from scratch (the lane took nothing); a failure, a
cancellation or an answer LiteLLM made itself is handed to a plan that adopts the attempt
as its first (`Plan.adopt`) and goes on from there as for any attempt of its own. The
records are the plan's: the same `Attempt`, the same breaker write by the same id, the
same journey.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.gate import Send, listed_cost
from ..core.journey import Journey, Routed
from ..core.outcomes import answer
from ..endpoints import Endpoint, reading
from ..ground.clock import Clock
from ..ground.ids import new_id
from ..ground.outcome import Wire
from ..ground.records import Skip
from ..policies.breaker import HealthBook
from ..policies.candidate import Candidate
from ..policies.requirements import Requirements
from ..policies.retry import Retry
from ..state.store import Store
from . import calls, transport

if TYPE_CHECKING:
    from ..core.plan import Plan
    from .calls import OnRestart

__all__ = ["Call", "Lane"]

Build = Callable[["Call", str], "Plan"]


@dataclass(slots=True)
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


class Lane:
    """The express lane to one route (the first of its group for the calls that take it):
    what the common call needs of the router, read once."""

    __slots__ = ("book", "candidate", "clock", "emit", "store")

    def __init__(
        self,
        candidate: Candidate,
        book: HealthBook | None,
        store: Store,
        clock: Clock,
        emit: Callable[[object], None],
    ) -> None:
        self.candidate = candidate
        self.book = book
        self.store = store
        self.clock = clock
        self.emit = emit

    def admits(self, now: float) -> bool:
        """Whether the breaker admits the route at `now` as the gate's one-step admission
        does: its record closed, admitted unchanged. Nothing is taken either way."""
        if self.book is None:
            return True
        h = self.store.health(self.candidate.id)
        return h.state == "closed" and self.book.admits_as_is(h, now)

    def call(self, call: Call, build: Build, restart: bool, on_restart: OnRestart) -> Routed[Any]:
        """Send `call` to the route and return its answer, as `calls.call` would."""
        started = self.clock.now()
        if not self.admits(started):
            return calls.call(build(call, new_id()), call.endpoint, call.call_kwargs, restart, on_restart)
        id, wire, timeout = new_id(), Wire(), call.timeout
        result: Any = None
        error: BaseException | None = None
        try:
            result = transport.call(
                call.endpoint.function, self.candidate.route, call.call_kwargs, call.group,
                timeout, request_id=id, attempt=1, wire=wire,
            )
        except BaseException as caught:
            error = caught
        if error is None:
            routed = self._answered(call, id, started, wire, result)
            if routed is not None:
                return routed
        # Outside the except block: what the plan raises next is not chained to this error.
        plan, sent = self._handoff(call, build, id, started, timeout, wire, result, error)
        return calls.call(plan, call.endpoint, call.call_kwargs, restart, on_restart, sent)

    async def acall(
        self, call: Call, build: Build, restart: bool, on_restart: OnRestart
    ) -> Routed[Any]:
        """The async twin of `call`."""
        started = self.clock.now()
        if not self.admits(started):
            return await calls.acall(
                build(call, new_id()), call.endpoint, call.call_kwargs, restart, on_restart
            )
        id, wire, timeout = new_id(), Wire(), call.timeout
        result: Any = None
        error: BaseException | None = None
        try:
            result = await transport.acall(
                call.endpoint.afunction, self.candidate.route, call.call_kwargs, call.group,
                timeout, request_id=id, attempt=1, wire=wire,
            )
        except BaseException as caught:  # a cancellation too: the plan records and re-raises it
            error = caught
        if error is None:
            routed = self._answered(call, id, started, wire, result)
            if routed is not None:
                return routed
        plan, sent = self._handoff(call, build, id, started, timeout, wire, result, error)
        return await calls.acall(plan, call.endpoint, call.call_kwargs, restart, on_restart, sent)

    def _answered(
        self, call: Call, id: str, started: float, wire: Wire, result: Any
    ) -> Routed[Any] | None:
        """The answer's records, as the plan's `answered` makes them. Only an answer to a
        request LiteLLM says it handed to the provider is kept here: a mock, its cache, or
        any answer it made some way nobody listed (None) is the plan's to settle."""
        hidden = reading.hidden_of(result)
        wire.cached = reading.hit_in(hidden)
        if not wire.left or wire.local:
            return None
        candidate = self.candidate
        usage = call.endpoint.usage(result)
        cost = listed_cost(candidate, usage)
        if self.book is not None:
            token = f"{id}.1"
            change, op, made = self.book.succeeding(candidate.id, token, candidate.name)
            self.store.update_health(candidate.id, change, token=token, op=op)
            made()
        elapsed = max(0.0, self.clock.now() - started)
        attempt = answer(
            candidate.route, call.group, id, call.endpoint.name, elapsed, cost, usage,
            model=reading.model_of(result),
        )
        self.emit(attempt)
        journey = Journey(
            call.group, call.needs, (attempt,), answered_by=candidate.name, elapsed=elapsed, id=id
        )
        return calls.stamped(result, candidate.route, journey, hidden)

    def _handoff(
        self,
        call: Call,
        build: Build,
        id: str,
        started: float,
        timeout: float | None,
        wire: Wire,
        result: Any,
        error: BaseException | None,
    ) -> tuple[Plan, calls.Sent]:
        """The call's plan, holding the attempt the lane made as its first."""
        plan = build(call, id)
        send = Send(self.candidate, started, None, 0.0, timeout, 1, False, f"{id}.1", None, 1, wire)
        plan.adopt(send)
        return plan, calls.Sent(send, result, error)

