"""Planning: from a call's keyword arguments to a `Plan`, for any endpoint.

The `Planner` holds what a router was built with (its groups, policies, store and clock)
and turns one call into one `Plan`: which group, what the request needs (the endpoint
included), what it may cost, in which order its routes are considered. It measures a
request only as far as a decision needs: a token count for price ordering, bounds for a
budget. The static checks of a group depend only on what the request needs, so they are
sifted once per (group, needs) and kept in an LRU cache.
"""

from __future__ import annotations

import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.checks import sift
from ..core.events import request_attributes
from ..core.gate import admits_at_once
from ..core.plan import Plan
from ..core.validate import REFUSED_KWARGS, check_call, check_policies_of, conflicts
from ..endpoints import Endpoint, with_messages
from ..endpoints import endpoint as endpoint_named
from ..ground.clock import Clock
from ..ground.deadline import Deadline
from ..ground.errors import ConfigError, NoRouteError
from ..ground.records import Skip
from ..ground.route import Route
from ..policies.bounds import RequestFacts
from ..policies.breaker import HealthBook
from ..policies.candidate import Candidate
from ..policies.group_info import group_info
from ..policies.hedge import Hedge, HedgeShares, Latencies, side_effect
from ..policies.limits import RateBook
from ..policies.order import (
    BY_WINDOWS,
    Arrange,
    ArrangeByHealth,
    Order,
    OrderContext,
    Ordering,
    arrange,
    prices_order,
)
from ..policies.requirements import Requirements
from ..policies.retry import Retry
from ..policies.scopes import Budgets, scope_of
from ..state.store import Store
from . import plain, window
from .express import Call, Lane, takes_lane
from .facts import measured
from .prompt import Prompt
from .seam import settings

__all__ = ["POLICY_KWARGS", "Call", "Planner"]

_ON_DEVICE = Requirements(on_device=True)

# Keywords the router takes out of a call before LiteLLM sees it.
POLICY_KWARGS = ("on_device", "needs", "deadline", "retry", "wait_for_capacity", "hedge", "scope")
_TAKEN = frozenset((*POLICY_KWARGS, *REFUSED_KWARGS))

_SIFTED = 1024  # (group, needs) pairs kept sifted

Sifted = tuple[Sequence[Candidate], Sequence[Skip]]


class Planner:
    """Turns calls into plans for one router (see the module docstring). Thread-safe."""

    def __init__(
        self,
        candidates: Sequence[Candidate],
        *,
        order: Order | Ordering,
        orders: Mapping[str, Order | Ordering],
        budgets: Budgets | None,
        health: HealthBook | None,
        retry: Retry | None,
        deadline: float | None,
        store: Store,
        clock: Clock,
        emit: Callable[[object], None],
        wait_for_capacity: bool = False,
        frame: Callable[[object], None] | None = None,
        hedge: Hedge | Mapping[str, Hedge | None] | None = None,
        latencies: Latencies | None = None,
        hedge_shares: HedgeShares | None = None,
    ) -> None:
        self.groups: dict[str, tuple[Candidate, ...]] = {}
        self.by_model: dict[str, tuple[Candidate, ...]] = {}
        for c in candidates:
            self.groups[c.route.group] = (*self.groups.get(c.route.group, ()), c)
            self.by_model[c.route.model] = (*self.by_model.get(c.route.model, ()), c)
        self._order = order
        self._orders = dict(orders)
        self.budgets = budgets
        self.health = health
        self._retry = retry
        self._deadline = deadline
        self.store = store
        self._clock = clock
        self._emit = emit
        # Each group's round-robin turn: read when a request is planned, moved on only when
        # one is first sent, so an explanation or a request that sends nothing takes none.
        self._turns: defaultdict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self._wait = wait_for_capacity
        self._frame = frame
        # Groups with a rate-limited route; groups whose ordering reads calls in flight
        # (every route of theirs takes a slot).
        self._limited = {
            g for g, cs in self.groups.items() if any(c.route.rpm or c.route.tpm for c in cs)
        }
        # Groups whose requests are measured for a tokens-per-minute limit.
        self._counted = {g for g, cs in self.groups.items() if any(c.route.tpm for c in cs)}
        self._books = {
            g: RateBook(tracks_all=self.order_of(g) in BY_WINDOWS)
            for g in self.groups
            if g in self._limited or self.order_of(g) in BY_WINDOWS
        }
        # Every secret of each group's routes, longest first, for the plan's scrubber.
        self._secrets = {
            g: tuple(sorted({x for c in cs for x in c.route.secrets}, key=len, reverse=True))
            for g, cs in self.groups.items()
        }
        # Per (group, needs, endpoint): the routes sifted by those needs, and the express
        # lane calls with them may take (a Messages call needs what a chat call needs, sent
        # by another function). Emptied when it outgrows _SIFTED: recomputed at once.
        self._sifted: dict[tuple[str, Requirements, str], tuple[Sifted, Lane | None]] = {}
        # Per model string: what its plain chat calls are planned with (`drive.plain`),
        # left by its first plain call read in full.
        self._plain: dict[str, plain.Known] = {}
        self._plain_needs = Requirements.from_kwargs({"messages": [{"content": ""}]})
        # Each group's hedge, and the routes' recent times a `Hedge(after="p95")` reads
        # (kept across reconfigurations, by route id).
        self._hedges = {
            g: (hedge.get(g) if isinstance(hedge, Mapping) else hedge) for g in self.groups
        }
        self.latencies = latencies if latencies is not None else Latencies()
        self.hedge_shares = hedge_shares if hedge_shares is not None else HedgeShares()
        # Groups whose calls may take the express lane (`lane`): nothing of theirs is
        # ordered per request or rate-limited, the store answers in this process, and a
        # budget's hold is taken in one store operation (`lane_hold`).
        at_once = budgets is None or admits_at_once(store)
        self._express = {
            g for g in self.groups
            if at_once and frame is None and self._hedges[g] is None and not store.remote
            and g not in self._limited and self.order_of(g) is Order.AS_LISTED
        }

    def carry_turns(self, previous: Planner) -> None:
        """Each group whose routes are those of `previous` (by id, in order) keeps its
        round-robin turn."""
        for g, cs in self.groups.items():
            before = previous.groups.get(g)
            if before is not None and [c.id for c in before] == [c.id for c in cs]:
                self._turns[g] = previous._turns[g]

    def group(self, model: str | None) -> tuple[str, tuple[Candidate, ...]]:
        """The group `model` names (or the route whose model string it is)."""
        if model is None:
            if len(self.groups) == 1:
                return next(iter(self.groups.items()))
            raise NoRouteError(f"model= is required: this router has groups {sorted(self.groups)}")
        if not isinstance(model, str):
            raise ConfigError(f"model must be a group name (a string), got {model!r}")
        if model in self.groups:
            return model, self.groups[model]
        if model in self.by_model:
            return model, self.by_model[model]
        raise NoRouteError(
            f"model={model!r} names no group and no route's model; groups: {sorted(self.groups)}"
        )

    def needs(self, endpoint: Endpoint, kwargs: Mapping[str, Any]) -> Requirements:
        """What the call needs, its arguments checked first (a ConfigError, nothing sent)."""
        endpoint.check(kwargs)
        check_call(kwargs)
        read = endpoint.requirements(kwargs)
        on_device = kwargs.get("on_device", False)
        if not isinstance(on_device, bool):
            raise ConfigError(f"on_device must be True or False, got {on_device!r}")
        if on_device:
            read = read | _ON_DEVICE
        return read if kwargs.get("needs") is None else read | Requirements.of(kwargs["needs"])

    def model_info(self, group: str, provider: str) -> dict[str, Any]:
        """The group's capabilities in LiteLLM's model-info words (`policies.group_info`)."""
        if group not in self.groups:
            raise KeyError(f"no group named {group!r}; groups: {sorted(self.groups)}")
        return group_info(self.groups[group], provider)

    def serves(self, route: str) -> frozenset[str]:
        """The named route's capabilities (the endpoints it serves too), by name."""
        for c in itertools.chain.from_iterable(self.groups.values()):
            if c.name == route:
                return frozenset(cap.value for cap in c.capabilities.have)
        names = [c.name for c in itertools.chain.from_iterable(self.groups.values())]
        raise KeyError(f"no route named {route!r}; routes: {names}")

    def now(self) -> float:
        """The router's clock, now."""
        return self._clock.now()

    def order_of(self, group: str) -> Order | Ordering:
        return self._orders.get(group, self._order)

    def facts(
        self,
        endpoint: Endpoint,
        group: str,
        kwargs: Mapping[str, Any],
        *,
        explaining: bool = False,
        prompt: Prompt | None = None,
    ) -> RequestFacts | None:
        """Measure the request once, and only what a price decision needs: the token count
        orders routes (and explains), the bounds hold the budget (`facts.measured`)."""
        count = explaining or prices_order(self.order_of(group))
        if self.budgets is None and not count and group not in self._counted:
            return None
        return measured(
            endpoint,
            kwargs,
            count=count,
            bounded=self.budgets is not None or group in self._counted,
            image_tokens=self.budgets.image_tokens if self.budgets else 0,
            prompt=prompt,
        )

    def _ordering(
        self,
        group: str,
        facts: RequestFacts | None,
        endpoint: Endpoint,
        needs: Requirements,
        *,
        take: bool = False,
    ) -> tuple[Arrange | None, ArrangeByHealth | None]:
        """The request's ordering. A live request (`take`) takes the group's turn as it
        reads it, in one step: concurrent requests planned before any of them is sent (on a
        shared store every plan awaits it) each get their own turn, so a rotation spreads
        them. `explain` reads the turn without taking it."""
        if self.order_of(group) is Order.AS_LISTED:
            return None, None
        with self._lock:
            turn = self._turns[group]
            if take:
                self._turns[group] = turn + 1
        context = OrderContext(
            group=group, facts=facts, now=self._clock.now(), turn=turn,
            endpoint=endpoint.name, streaming=needs.streaming,
        )
        return arrange(self.order_of(group), context)

    def _dispatched(self, group: str) -> Callable[[str, int], None] | None:
        """What is told as each attempt is sent: an ordering with `on_dispatch(route)`
        hears of every one."""
        tell = getattr(self.order_of(group), "on_dispatch", None)
        if not callable(tell):
            return None

        def sent(route: str, attempt: int) -> None:
            tell(route)

        return sent

    def _retry_for(self, route: Route) -> Retry | None:
        return route.retry if isinstance(route.retry, Retry) else self._retry

    def prepare(
        self, endpoint: Endpoint, model: str | None, messages: Any, kwargs: Mapping[str, Any]
    ) -> Call:
        """The call read and checked: its group, what it needs, what LiteLLM is to get.
        Every argument error is raised here, before anything is sent or held."""
        if isinstance(model, str) and endpoint.name == "chat":
            known = self._plain.get(model)
            own = plain.served(kwargs) if known is not None else None
            if known is not None and own is not None and plain.is_plain(messages, own):
                call = plain.call_of(endpoint, model, known, messages, own, self._deadline, self._wait)
                call.scope = scope_of(kwargs.get("scope"))
                return call
        kwargs = with_messages(endpoint, messages, kwargs)
        settings.check_globals()
        group, candidates = self.group(model)
        needs = self.needs(endpoint, kwargs)
        # The router's own keywords out, and refused ones passed unset (`validate.unset`).
        call_kwargs = {
            k: v
            for k, v in kwargs.items()
            if k not in _TAKEN or (k not in POLICY_KWARGS and conflicts(k, v))
        }
        retry, wait, previous = check_policies_of(kwargs, endpoint.name, self._wait)
        key = (group, needs, endpoint.name)
        entry = self._sifted.get(key)
        if entry is None:
            entry = self._sift(key, candidates, endpoint)
        if needs == self._plain_needs and endpoint.name == "chat" and group == model:
            self._plain[group] = (candidates, needs, *entry)
        timeout = call_kwargs.get("timeout")
        return Call(
            endpoint=endpoint, group=group, candidates=candidates, needs=needs, call_kwargs=call_kwargs, sifted=entry[0],
            seconds=kwargs.get("deadline", self._deadline),
            timeout=float(timeout) if isinstance(timeout, int | float) else None,
            retry=retry, wait=wait, previous=previous, lane=entry[1], hedge=kwargs.get("hedge"), own_hedge="hedge" in kwargs,
            scope=scope_of(kwargs.get("scope")),
        )

    def _sift(
        self, key: tuple[str, Requirements, str], candidates: Sequence[Candidate], endpoint: Endpoint
    ) -> tuple[Sifted, Lane | None]:
        group, needs, _ = key
        eligible, skips = sifted = sift(candidates, needs)
        lane = None
        if group in self._express and eligible and not skips and takes_lane(eligible[0], needs):
            lane = Lane(
                eligible[0], self.health, self.store, self._clock, self._emit, group, needs,
                endpoint, self.latencies.answered, self.budgets, self.facts,
            )
        if len(self._sifted) >= _SIFTED:
            self._sifted.clear()
        entry = self._sifted[key] = (sifted, lane)
        return entry

    def express(
        self, endpoint: str, model: str | None, messages: Any, kwargs: Mapping[str, Any]
    ) -> Lane | None:
        """The express lane of a plain chat call to a group whose plain calls take one (see
        `lane`), checked as `prepare` checks it (`plain.lane_of`); None for any other call,
        which `prepare` reads. Its `Call` is made (`plain_call`) only if the plan takes it."""
        if endpoint != "chat" or not isinstance(model, str) or self._deadline:
            return None
        return plain.lane_of(self._plain.get(model), messages, kwargs)

    def plain_call(self, group: str, call_kwargs: dict[str, Any]) -> Call:
        """The `Call` `prepare` reads for a plain chat call to `group` with `call_kwargs`."""
        known = self._plain[group]
        return plain.made(endpoint_named("chat"), group, known, call_kwargs, None, self._wait)

    def lane(self, call: Call) -> Lane | None:
        """The express lane for `call` (see `drive.express`), or None when the call needs
        the whole plan: rate limits, an ordering, a deadline, a stream, a hedge, an
        observer that frames requests, a store not in this process (or, under a budget,
        one that cannot hold a call in one operation), a route skipped."""
        if call.lane is None or call.seconds or call.call_kwargs.get("stream") or call.hedge:
            return None
        if not window.fits(call.lane.candidate, call.endpoint, call.call_kwargs, call.sifted, call.measure()):
            return None  # a route's window cannot take the prompt: the plan says so
        return call.lane

    def build(self, call: Call, id: str | None = None) -> Plan:
        """The call's plan (with `id`, the request's id the express lane gave it)."""
        endpoint, group, needs, call_kwargs = call.endpoint, call.group, call.needs, call.call_kwargs
        prompt = call.measure()  # one measure of the prompt for the budget and the window
        facts = self.facts(endpoint, group, call_kwargs, prompt=prompt)
        seconds, retry = call.seconds, call.retry
        sifted = window.fitted(endpoint, call_kwargs, call.sifted, prompt)
        # A request no route can serve sends nothing, and so takes no turn.
        ordering, by_health = self._ordering(
            group, facts, endpoint, needs, take=bool(sifted[0])
        )
        order = self.order_of(group)
        return Plan(
            group,
            call.candidates,
            needs,
            sifted=sifted,
            clock=self._clock,
            ordering=ordering,
            by_health=by_health,
            ledger=self.budgets.for_call(call.call_kwargs, call.scope) if self.budgets else None,
            facts=facts,
            health=self.health,
            retry=self._retry_for if retry is None else (lambda _route: retry),
            deadline=Deadline(self._clock.now(), seconds, self._clock) if seconds else None,
            timeout=call.timeout,
            emit=self._emit,
            on_result=None if isinstance(order, Order) else order.on_result,
            store=self.store,
            rates=self._books.get(group),
            by_windows=BY_WINDOWS.get(order) if isinstance(order, Order) else None,
            wait_for_capacity=call.wait,
            operation=endpoint.name,
            settings=request_attributes(call_kwargs) if self._frame is not None else None,
            frame=self._frame,
            on_dispatch=self._dispatched(group) if order is not Order.AS_LISTED else None,
            secrets=self._secrets.get(group, ()),
            call=call_kwargs,
            continues=call.previous,
            id=id,
            hedge=None if side_effect(endpoint.name, call_kwargs) else (
                call.hedge if call.own_hedge else self._hedges.get(group)
            ),
            latencies=self.latencies,
            shares=self.hedge_shares,
        )

