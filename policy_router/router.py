"""Router: the drop-in face over LiteLLM. It composes the policies and owns none.

`Router.completion` and `Router.acompletion` take LiteLLM's keyword arguments and return
LiteLLM's objects; `model=` names a group. Each call builds a `Plan` (the pure decision
core) and drives it with the loops in `drive.py`, the same short loop sync and async.
"""

from __future__ import annotations

import asyncio
import html
import itertools
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Literal

from . import transport
from .bounds import RequestFacts, prediction_tokens, prompt_bound, reply_tokens
from .breaker import Breaker, HealthBook
from .budget import Budget, Ledger, Spending
from .checks import candidate_for
from .clock import Clock, MonotonicClock
from .deadline import Deadline, check_seconds
from .drive import adrive, drive
from .errors import ConfigError, NoRouteError
from .journey import Explanation, Routed, Skip
from .observe import LogObserver, Observer, fan_out
from .order import (
    Arrange,
    ArrangeByHealth,
    Fastest,
    Order,
    OrderContext,
    Ordering,
    arrange,
)
from .plan import Candidate, Fault, FaultKind, Plan, Send, explain, sift
from .preflight import Verdict as PreflightVerdict
from .preflight import preflight_route, problems
from .prices import Money, PriceTable
from .requirements import Requirements
from .retry import Retry
from .route import Route
from .store import Health, InMemoryStore, Store, perform
from .stream import AsyncRoutedStream, Opened, RoutedStream, StreamRestart
from .validate import check_call, check_messages

__all__ = ["Router"]

# Keywords the router takes out of a call before LiteLLM sees it.
_POLICY_KWARGS = ("on_device", "needs", "deadline")


class Router:
    """Routes LiteLLM calls across groups of routes, by policy, and says why.

    Build it from `Route`s; call `completion`/`acompletion` exactly as you would call
    LiteLLM's, with `model=` naming a group. What a request needs is read off its kwargs
    (tools, images, response_format, cache_control, reasoning, stream), plus `on_device=True`
    (the on-device floor: never a vendor route, and no fall back to one) and
    `needs=Requirements(...)`. Routes are tried in the order written; a route is skipped,
    with a recorded reason, when LiteLLM does not know its model and it declares nothing,
    when it cannot meet a requirement, or when the floor excludes it.

    Faults about the provider (429, 5xx, timeouts, connection errors) and about the route
    (401, 403, 404) move on to the next route; faults about the request (400, 422, context
    window) stop, since every route would fail alike; a content-policy refusal stops with
    `RefusedError`. After real attempts failed, the last provider's own LiteLLM exception
    is raised with `.journey`; when nothing was sent, `NoRouteError`.

    LiteLLM's own retries and fallbacks are off on every call, and the router refuses to
    run while `litellm.num_retries` or `litellm.model_fallbacks` is set globally. With
    `quiet_litellm=True` (the default) it sets `litellm.suppress_debug_info`, so failing
    over does not print LiteLLM's help banner on every skip. The router is safe to share
    between threads and tasks.

    Health and spending live in `store`: in this process by default, or in Redis with
    `store=RedisStore(url)`, shared by every process whose router has the same `name`.
    """

    def __init__(
        self,
        routes: Iterable[Route],
        *,
        name: str = "default",
        order: Order | str | Ordering | Mapping[str, Order | str | Ordering] = Order.AS_LISTED,
        budget: Budget | None = None,
        breaker: Breaker | None = None,
        retry: Retry | None = None,
        deadline: float | None = None,
        store: Store | None = None,
        observers: Sequence[Observer] | None = None,
        clock: Clock | None = None,
        stream_failure: Literal["raise", "restart"] = "raise",
        on_restart: Callable[[StreamRestart], None] | None = None,
        quiet_litellm: bool = True,
    ) -> None:
        routes = list(routes)
        if not routes:
            raise ConfigError("Router needs at least one Route, got none")
        for i, r in enumerate(routes):
            if not isinstance(r, Route):
                raise ConfigError(
                    f"routes[{i}] must be a Route, got {type(r).__name__}; "
                    "write Route('provider/model', group=...)"
                )
        self._routes = tuple(_unique_names(routes))
        self._clock: Clock = clock or MonotonicClock()
        transport.check_globals()
        if quiet_litellm:
            transport.silence_banner()
        candidates = [candidate_for(r) for r in self._routes]
        if isinstance(order, Mapping):
            unknown = set(order) - {r.group for r in self._routes}
            if unknown:
                raise ConfigError(f"order names groups no route is in: {sorted(unknown)}")
            self._orders = {g: _order(o, self._routes) for g, o in order.items()}
            self._order: Order | Ordering = Order.AS_LISTED
        else:
            self._orders = {}
            self._order = _order(order, self._routes)
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget, got {type(budget).__name__}")
        if store is not None and not callable(getattr(store, "bind", None)):
            raise ConfigError(
                f"store must be a Store such as InMemoryStore() or RedisStore(url), got "
                f"{type(store).__name__}"
            )
        if not isinstance(name, str) or not name or not name.isprintable() or " " in name:
            raise ConfigError(
                f"Router name must be a non-empty string without spaces, got {name!r}; it "
                "names the router's keys in a shared store"
            )
        self.name = name
        self._notes: tuple[str, ...] = ()
        self._emit = fan_out([LogObserver(), *(observers or ())])
        self._store: Store = (store if store is not None else InMemoryStore()).bind(
            name, self._clock, self._emit
        )
        self._ledger = Ledger(budget, self._store) if budget is not None else None
        if breaker is not None and not isinstance(breaker, Breaker):
            raise ConfigError(f"breaker must be a Breaker, got {type(breaker).__name__}")
        if retry is not None and not isinstance(retry, Retry):
            raise ConfigError(f"retry must be a Retry, got {type(retry).__name__}")
        self._retry = retry
        if stream_failure not in ("raise", "restart"):
            raise ConfigError(
                f"stream_failure must be 'raise' or 'restart', got {stream_failure!r}"
            )
        if stream_failure == "restart" and on_restart is None:
            raise ConfigError(
                "stream_failure='restart' needs on_restart=callback: a plain `for chunk` "
                "consumer would otherwise receive the failed route's partial text followed by "
                "the next route's whole answer; the callback is told to discard what it had"
            )
        self._restart = stream_failure == "restart"
        self._on_restart = on_restart
        self._deadline = check_seconds(deadline, "deadline")
        self._health = HealthBook(breaker, self._store, self._emit) if breaker else None
        self._turns: defaultdict[str, itertools.count[int]] = defaultdict(itertools.count)
        self._turns_lock = threading.Lock()
        self._sifted: dict[
            tuple[str, Requirements], tuple[Sequence[Candidate], Sequence[Skip]]
        ] = {}
        self._groups: dict[str, tuple[Candidate, ...]] = {}
        self._by_model: dict[str, tuple[Candidate, ...]] = {}
        for c in candidates:
            self._groups[c.route.group] = (*self._groups.get(c.route.group, ()), c)
            self._by_model[c.route.model] = (*self._by_model.get(c.route.model, ()), c)

    @classmethod
    def from_config(cls, config: str | Path | Mapping[str, Any], **overrides: Any) -> Router:
        """Build a router from a policy file (YAML or TOML) or a mapping of the same shape.

        Every error names its place in the file and the fix. An `os.environ/NAME` secret
        whose variable is not set is an error here; `policy-router check` lists them all.
        Keyword arguments (`clock=`, `observers=`, ...) are passed to the constructor.
        """
        from .config import load  # pydantic models, built only when a file is read

        return cls._loaded(load(config), overrides)

    @classmethod
    def from_litellm_model_list(
        cls, model_list: Sequence[Mapping[str, Any]], **policies: Any
    ) -> Router:
        """Build a router from LiteLLM Router's own `model_list`, unchanged.

        `model_name` → group, `litellm_params` → route kwargs, `model_info` → capabilities,
        prices and reach; `order`, retries and cost fields are honoured; anything that is not
        applied is listed by `check()` with its place (see `litellm_config.py`). An
        `os.environ/NAME` that is not set raises, naming NAME. Policies (`order=`,
        `budget=`, `breaker=`, ...) are keyword arguments, as for the constructor.
        """
        from .litellm_config import model_list_routes

        return cls._loaded(model_list_routes(model_list), policies)

    @classmethod
    def _loaded(cls, loaded: Any, overrides: Mapping[str, Any]) -> Router:
        if loaded.missing:
            raise ConfigError("; ".join(loaded.missing))
        router = cls(loaded.routes, **{**loaded.policies, **overrides})
        router._notes = tuple(loaded.notes)
        return router

    # -- what the router holds -------------------------------------------------------------
    @property
    def routes(self) -> tuple[Route, ...]:
        """Every route, in the order given (names made unique)."""
        return self._routes

    @property
    def groups(self) -> dict[str, tuple[Route, ...]]:
        """Group name → its routes, in written order."""
        return {g: tuple(c.route for c in cs) for g, cs in self._groups.items()}

    def unusable(self) -> dict[str, str]:
        """Routes no request can use, by name, each with why and what to do about it."""
        return {
            c.name: c.capabilities.why_unknown
            for cs in self._groups.values()
            for c in cs
            if not c.capabilities.known
        }

    def spending(self) -> Spending:
        """The budget's account: spent, reserved, left, calls, and whether it is exact.

        With a shared store that cannot be reached it raises `StoreUnavailableError`
        rather than report a figure it could not read.
        """
        if self._ledger is None:
            raise ConfigError("this router has no budget; build it with budget=Budget(...)")
        return self._ledger.spending()

    def health(self) -> dict[str, Health]:
        """Every route's health record by name (closed and untouched routes included)."""
        known = self._store.all_health()
        return {r.name: known.get(r.name, Health()) for r in self._routes}

    def resting(self) -> dict[str, float]:
        """Routes resting now, by name, with the seconds of rest left."""
        now = self._clock.now()
        return {
            name: h.rest_until - now
            for name, h in self.health().items()
            if h.state == "open" and h.rest_until > now
        }

    def reset(self, route: str | None = None) -> None:
        """Forget the health of one route, or of all: they are closed and untried again."""
        if route is not None and route not in {r.name for r in self._routes}:
            raise KeyError(f"no route named {route!r}")
        self._store.reset_health(route)

    def preflight(self, *, live: bool = False) -> dict[str, PreflightVerdict]:
        """Ready, Denied(why) or Unknown(why) for every route, before any real request.

        Credentials are checked with LiteLLM's environment validation, counting those the
        route carries under every name LiteLLM reads for its provider; "denied" only when
        a credential is surely missing, "unknown" when its SDK may find one elsewhere (an
        AWS profile, Google's default credentials). With `live=True` a one-token request is
        sent to each route (which costs a little). With a breaker, a route the *live* check
        denied rests for the breaker's `settled` time; nothing else rests a route.
        """
        return {r.name: self._after_preflight(r, preflight_route(r, live)) for r in self._routes}

    async def apreflight(self, *, live: bool = False) -> dict[str, PreflightVerdict]:
        """The async twin of `preflight`."""
        verdicts = await asyncio.gather(
            *(asyncio.to_thread(preflight_route, r, live) for r in self._routes)
        )
        return {
            r.name: self._after_preflight(r, v) for r, v in zip(self._routes, verdicts, strict=True)
        }

    def _after_preflight(self, route: Route, verdict: PreflightVerdict) -> PreflightVerdict:
        if verdict.state == "denied" and verdict.live and self._health is not None:
            fault = Fault(FaultKind.ACCESS, None, route.redact(verdict.why))
            perform(self._store, self._health.failed(route.name, fault, self._clock.now()))
        return verdict

    def check(self, *, max_age_days: int | None = None, today: date | None = None) -> list[str]:
        """What is wrong with this router's configuration, one sentence per problem.

        Settings of the file it was loaded from that are not applied (a LiteLLM
        `model_list`'s `weight`, a proxy's `general_settings`, ...), unusable routes
        (unknown model, nothing declared), missing credentials, routes a budget will always
        refuse (unpriced, or priced in another currency), price tables older than
        `max_age_days`, and a shared store that does not answer. Nothing is sent
        to a provider (a shared store is pinged). An empty list means no problem was found,
        not that every provider will answer: `preflight(live=True)` asks them.
        """
        return [
            *self._notes,
            *problems(
                self._routes,
                self.unusable(),
                self._ledger.budget if self._ledger is not None else None,
                self._store,
                max_age_days,
                today,
            ),
        ]

    def capabilities(self, route: str) -> frozenset[str]:
        """What the named route can do, as capability names."""
        for cs in self._groups.values():
            for c in cs:
                if c.name == route:
                    return frozenset(cap.value for cap in c.capabilities.have)
        raise KeyError(f"no route named {route!r}; routes: {[r.name for r in self._routes]}")

    # -- calls -----------------------------------------------------------------------------
    def completion(self, model: str | None = None, messages: Any = None, **kwargs: Any) -> Any:
        """Route a `litellm.completion` call: a `ModelResponse`, or a `RoutedStream`."""
        return self.route(model, messages, **kwargs).response

    async def acompletion(
        self, model: str | None = None, messages: Any = None, **kwargs: Any
    ) -> Any:
        """Route a `litellm.acompletion` call: a `ModelResponse`, or an `AsyncRoutedStream`."""
        return (await self.aroute(model, messages, **kwargs)).response

    def route(self, model: str | None = None, messages: Any = None, **kwargs: Any) -> Routed[Any]:
        """Like `completion`, but returns `Routed` (response, route, journey, attempts)."""
        plan, call_kwargs = self._plan(model, messages, kwargs)
        group = plan.group
        if call_kwargs.get("stream"):

            def open_stream(send: Send) -> Opened:
                kwargs, strip = _stream_kwargs(call_kwargs, send)
                source = transport.call(send.route, kwargs, group, send.timeout)
                iterator = iter(source)
                first = next(iterator, None)
                if first is None or transport.is_hollow_first_chunk(first):
                    raise transport.stream_cut_error(send.route, "")
                return source, iterator, first, strip

            opened, send = drive(plan, open_stream, final=False)
            stream = RoutedStream(
                opened,
                plan,
                send,
                reopen=(lambda: drive(plan, open_stream, final=False)) if self._restart else None,
                on_restart=self._on_restart,
            )
            return Routed(stream, send.route, plan.journey)
        response, send = drive(
            plan, lambda s: transport.call(s.route, call_kwargs, group, s.timeout)
        )
        return self._finish(response, send, plan)

    async def aroute(
        self, model: str | None = None, messages: Any = None, **kwargs: Any
    ) -> Routed[Any]:
        """Like `acompletion`, but returns `Routed` (response, route, journey, attempts)."""
        plan, call_kwargs = self._plan(model, messages, kwargs)
        group = plan.group
        if call_kwargs.get("stream"):

            async def open_stream(send: Send) -> Opened:
                kwargs, strip = _stream_kwargs(call_kwargs, send)
                source = await transport.acall(send.route, kwargs, group, send.timeout)
                iterator = source.__aiter__()
                first = await anext(iterator, None)
                if first is None or transport.is_hollow_first_chunk(first):
                    raise transport.stream_cut_error(send.route, "")
                return source, iterator, first, strip

            opened, send = await adrive(plan, open_stream, final=False)
            stream = AsyncRoutedStream(
                opened,
                plan,
                send,
                reopen=(lambda: adrive(plan, open_stream, final=False)) if self._restart else None,
                on_restart=self._on_restart,
            )
            return Routed(stream, send.route, plan.journey)

        async def open_(send: Send) -> Any:
            return await transport.acall(send.route, call_kwargs, group, send.timeout)

        response, send = await adrive(plan, open_)
        return self._finish(response, send, plan)

    def explain(self, model: str | None = None, messages: Any = None, **kwargs: Any) -> Explanation:
        """The verdict for every route of the group for this request. Nothing is sent."""
        group, candidates = self._group(model)
        needs = self._needs(messages, kwargs)
        facts = self._facts(group, {**kwargs, "messages": messages}, explaining=True)
        ordering, by_health = self._ordering(group, facts)
        if by_health is not None:
            seen = self._store.all_health()
            ordering = lambda cs: by_health(cs, seen)  # noqa: E731
        return explain(group, candidates, needs, ordering, self._ledger, facts)

    # -- the parts both drivers share --------------------------------------------------------
    def _finish(self, response: Any, send: Send, plan: Plan) -> Routed[Any]:
        journey = plan.journey
        hidden = getattr(response, "_hidden_params", None)
        if isinstance(hidden, dict):
            hidden["policy_router"] = journey
        return Routed(response, send.route, journey)

    def _group(self, model: str | None) -> tuple[str, tuple[Candidate, ...]]:
        if model is None:
            if len(self._groups) == 1:
                return next(iter(self._groups.items()))
            raise NoRouteError(f"model= is required: this router has groups {sorted(self._groups)}")
        if not isinstance(model, str):
            raise ConfigError(f"model must be a group name (a string), got {model!r}")
        if model in self._groups:
            return model, self._groups[model]
        if model in self._by_model:
            return model, self._by_model[model]
        raise NoRouteError(
            f"model={model!r} names no group and no route's model; groups: {sorted(self._groups)}"
        )

    def _needs(self, messages: Any, kwargs: Mapping[str, Any]) -> Requirements:
        check_messages(messages)
        check_call(kwargs)
        on_device = kwargs.get("on_device", False)
        if not isinstance(on_device, bool):
            raise ConfigError(f"on_device must be True or False, got {on_device!r}")
        read = Requirements.from_kwargs({**kwargs, "messages": messages})
        return read | Requirements.of(kwargs.get("needs")) | Requirements(on_device=on_device)

    def _plan(
        self, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> tuple[Plan, dict[str, Any]]:
        transport.check_globals()
        group, candidates = self._group(model)
        needs = self._needs(messages, kwargs)
        call_kwargs = {k: v for k, v in kwargs.items() if k not in _POLICY_KWARGS}
        call_kwargs["messages"] = messages
        facts = self._facts(group, call_kwargs)
        seconds = kwargs.get("deadline", self._deadline)
        timeout = call_kwargs.get("timeout")
        sifted = self._sifted.get((group, needs))
        if sifted is None:
            # The static checks depend only on the group and the needs: sift once for each.
            sifted = self._sifted[(group, needs)] = sift(candidates, needs)
        ordering, by_health = self._ordering(group, facts)
        plan = Plan(
            group,
            candidates,
            needs,
            sifted=sifted,
            clock=self._clock,
            ordering=ordering,
            by_health=by_health,
            ledger=self._ledger,
            facts=facts,
            health=self._health,
            retry=self._retry_for,
            deadline=Deadline(self._clock.now(), seconds, self._clock) if seconds else None,
            timeout=float(timeout) if isinstance(timeout, int | float) else None,
            emit=self._emit,
            on_result=order.on_result
            if isinstance(order := self._order_of(group), Ordering)
            else None,
            store=self._store,
        )
        return plan, call_kwargs

    def _retry_for(self, route: Route) -> Retry | None:
        return route.retry if isinstance(route.retry, Retry) else self._retry

    def _order_of(self, group: str) -> Order | Ordering:
        return self._orders.get(group, self._order)

    def _facts(
        self, group: str, kwargs: Mapping[str, Any], *, explaining: bool = False
    ) -> RequestFacts | None:
        """Measure the request once, and only what a price decision needs: the token count
        orders routes (and explains), the byte bound holds the budget."""
        count = explaining or self._order_of(group) is Order.CHEAPEST
        if self._ledger is None and not count:
            return None
        image_tokens = self._ledger.budget.image_tokens if self._ledger else 0
        return RequestFacts(
            prompt_tokens=transport.count_tokens(kwargs) if count else 0,
            prompt_bound=prompt_bound(kwargs, image_tokens) if self._ledger else 0,
            reply_tokens=reply_tokens(kwargs, "max_tokens", "max_completion_tokens"),
            choices=kwargs.get("n"),
            reply_extra=prediction_tokens(kwargs),
        )

    def _ordering(
        self, group: str, facts: RequestFacts | None
    ) -> tuple[Arrange | None, ArrangeByHealth | None]:
        order = self._order_of(group)
        with self._turns_lock:
            turn = next(self._turns[group])
        return arrange(order, OrderContext(group, facts, self._clock.now(), turn))

    def _repr_html_(self) -> str:
        """A table for notebooks: each route with its reach, capabilities, price, health."""
        health = self.health()
        rows = []
        for group, cs in self._groups.items():
            for c in cs:
                price = "unpriced"
                if c.price is not None and c.route.prices is not None:
                    cur = c.route.prices.currency
                    price = (
                        f"{Money(c.price.input, cur)} / {Money(c.price.output, cur)} per M tokens"
                    )
                h = health[c.name]
                cells = (
                    group,
                    c.name,
                    c.route.reach.value,
                    c.capabilities.describe(),
                    price,
                    f"{h.state} ({h.failures} failures)" if h.failures else h.state,
                )
                rows.append("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in cells) + "</tr>")
        head = "".join(
            f"<th>{h}</th>" for h in ("group", "route", "reach", "can do", "price in/out", "health")
        )
        return f"<table><tr>{head}</tr>{''.join(rows)}</table>"

    def __repr__(self) -> str:
        lines = [f"Router({len(self._routes)} routes in {len(self._groups)} groups)"]
        for group, cs in self._groups.items():
            lines.append(f"  {group}:")
            lines.extend(
                f"    {c.name}  [{c.route.reach.value}]  {c.capabilities.describe()}" for c in cs
            )
        return "\n".join(lines)


def _order(order: Order | str | Ordering, routes: Sequence[Route]) -> Order | Ordering:
    if isinstance(order, Ordering) and not isinstance(order, str):
        return order
    if order == Order.FASTEST:
        return Fastest()
    try:
        chosen = Order(order)
    except ValueError:
        names = ", ".join(o.value for o in Order)
        raise ConfigError(f"order={order!r} is not an ordering; use one of: {names}") from None
    if chosen is Order.CHEAPEST:
        currencies = {r.prices.currency for r in routes if isinstance(r.prices, PriceTable)}
        if len(currencies) > 1:
            raise ConfigError(
                f"order=cheapest cannot compare prices in {sorted(currencies)}; "
                "give every route a table in one currency"
            )
    return chosen


def _stream_kwargs(kwargs: dict[str, Any], send: Send) -> tuple[dict[str, Any], bool]:
    """Ask for the final usage chunk when the call is priced; the returned flag says to
    strip that chunk, because the caller did not ask for it."""
    options = kwargs.get("stream_options") or {}
    if options.get("include_usage") or (send.candidate.price is None and send.held is None):
        return kwargs, False
    return {**kwargs, "stream_options": {**options, "include_usage": True}}, True


def _unique_names(routes: Sequence[Route]) -> list[Route]:
    """Routes with names made unique: a repeated name gets `#2`, `#3`, ... appended."""
    seen: dict[str, int] = {}
    out = []
    for r in routes:
        n = seen.get(r.name, 0) + 1
        seen[r.name] = n
        out.append(r if n == 1 else r.with_name(f"{r.name}#{n}"))
    return out
