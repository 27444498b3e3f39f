"""Router: the drop-in face over LiteLLM. It composes the policies and owns none.

`Router.completion`, `embedding`, `responses` and `text_completion` (and their async twins)
take LiteLLM's keyword arguments and return LiteLLM's objects; `model=` names a group. Each
call is planned by the `Planner` (`drive.planning`) into a `Plan`, the pure decision core, and
driven by the loops in `drive.loops` (or opened as a stream by `drive.stream`): one path for
every endpoint, which is data (`endpoints/`).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Literal

from .core.journey import Explanation, Routed
from .core.plan import Plan
from .core.validate import check_policies
from .drive import calls, model_info, settings
from .drive.face import LiteLLMFace
from .drive.planning import Planner
from .drive.preflight import Verdict as PreflightVerdict
from .drive.preflight import embeds_only, preflight_route, problems, rest_denied
from .drive.stream import StreamRestart
from .endpoints import Endpoint
from .endpoints import endpoint as endpoint_named
from .ground.clock import Clock, MonotonicClock
from .ground.deadline import check_seconds
from .ground.errors import ConfigError, RouterClosedError
from .ground.route import Route, unique_names
from .observe import overview
from .observe.observers import AttemptLog, LogObserver, Observer, fan_out
from .observe.report import History, Report
from .observe.report import read as read_report
from .policies.breaker import Breaker, HealthBook, counting_for
from .policies.budget import Budget, Ledger, Spending
from .policies.candidate import candidate_for
from .policies.order import Order, Ordering
from .policies.orderings import choose
from .policies.retry import Retry
from .state.memory import InMemoryStore
from .state.store import Health, Store
from .state.windows import Window

__all__ = ["Router"]


class Router(LiteLLMFace):
    """Routes LiteLLM calls across groups of routes, by policy, and says why.

    Build it from `Route`s; call `completion`/`acompletion` (or `embedding`, `responses`,
    `text_completion` and their async twins) exactly as you would call LiteLLM's, with
    `model=` naming a group. What a request needs is read off its kwargs (the endpoint,
    tools, images, response_format, cache_control, reasoning, stream), plus
    `on_device=True` (the on-device floor: never a vendor route, and no fall back to one)
    and `needs=Requirements(...)`. A route is skipped, with a recorded reason, when LiteLLM
    does not know its model and it declares nothing, when it cannot meet a requirement (an
    embedding model cannot do chat), or when the floor excludes it.

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
    Routes with `rpm`/`tpm` are skipped while their window is full; with
    `wait_for_capacity=True` (or per call) a request whose every route is full waits for
    the earliest slot instead, never past its deadline.
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
        wait_for_capacity: bool = False,
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
        check_policies(budget, breaker, retry, store, name, stream_failure, on_restart)
        self._routes = tuple(unique_names(routes))
        self._clock: Clock = clock or MonotonicClock()
        settings.check_globals()
        if quiet_litellm:
            settings.silence_banner()
        if isinstance(order, Mapping):
            unknown = set(order) - {r.group for r in self._routes}
            if unknown:
                raise ConfigError(f"order names groups no route is in: {sorted(unknown)}")
            orders = {g: choose(o, self._routes) for g, o in order.items()}
            default: Order | Ordering = Order.AS_LISTED
        else:
            orders, default = {}, choose(order, self._routes)
        self.name = name
        self._notes: tuple[str, ...] = ()
        self._closed = False
        self._owned: list[Any] = []  # what the router created, and so closes (from_config)
        self._observers = tuple(observers or ())
        # A request's start and end (events.py) go only to the caller's observers that may
        # want them (not the built-in ones), and when there are none nothing is built.
        framed = [o for o in self._observers if not isinstance(o, AttemptLog)]
        self._history = History()
        self._emit = fan_out([LogObserver(), self._history, *self._observers])
        self._store: Store = (store if store is not None else InMemoryStore()).bind(
            name, self._clock, self._emit
        )
        self._ledger = Ledger(budget, self._store) if budget is not None else None
        breaker = breaker or counting_for([default, *orders.values()])
        self._health = HealthBook(breaker, self._store, self._emit) if breaker else None
        self._restart = stream_failure == "restart"
        self._on_restart = on_restart
        self._planner = Planner(
            [candidate_for(r, *model_info.model_info(r)) for r in self._routes],
            order=default,
            orders=orders,
            ledger=self._ledger,
            health=self._health,
            retry=retry,
            deadline=check_seconds(deadline, "deadline"),
            store=self._store,
            clock=self._clock,
            emit=self._emit,
            wait_for_capacity=bool(wait_for_capacity),
            frame=fan_out(framed) if framed else None,
        )
        for observer in self._observers:
            attach = getattr(observer, "attach", None)
            if callable(attach):
                attach(self)  # an observer that reads the router (OTelObserver's gauges)

    @classmethod
    def from_config(cls, config: str | Path | Mapping[str, Any], **overrides: Any) -> Router:
        """Build a router from a policy file (YAML or TOML), a LiteLLM proxy `config.yaml`,
        or a mapping of either shape.

        Every error names its place in the file and the fix. An `os.environ/NAME` secret
        whose variable is not set is an error here; `policy-router check` lists them all.
        Keyword arguments (`clock=`, `observers=`, ...) are passed to the constructor.
        """
        from .config.policy_file import load

        return cls._loaded(load(config), overrides)

    @classmethod
    def from_litellm_model_list(
        cls, model_list: Sequence[Mapping[str, Any]], **policies: Any
    ) -> Router:
        """Build a router from LiteLLM Router's own `model_list`, unchanged.

        `model_name` → group, `litellm_params` → route kwargs, `model_info` → capabilities
        (its `mode` says what the route serves), prices and reach; `order`, retries and
        cost fields are honoured; anything that is not applied is listed by `check()` with
        its place (see `config.litellm`). An `os.environ/NAME` that is not set raises,
        naming NAME. Policies (`order=`, `budget=`, `breaker=`, ...) are keyword arguments.
        """
        from .config.litellm import model_list_routes

        return cls._loaded(model_list_routes(model_list), policies)

    @classmethod
    def _loaded(cls, loaded: Any, overrides: Mapping[str, Any]) -> Router:
        if loaded.missing:
            raise ConfigError("; ".join(loaded.missing))
        router = cls(loaded.routes, **{**loaded.policies, **overrides})
        router._notes = tuple(loaded.notes)
        if "store" in loaded.policies and "store" not in overrides:
            router._owned.append(loaded.policies["store"])  # built from the file's URL
        return router

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the router: later calls raise `RouterClosedError`. Idempotent.

        Closes only what the router created: a store it built from a config's URL (after
        one try to write what an outage held back). A store passed as `store=` is the
        caller's and stays open; LiteLLM's HTTP clients are LiteLLM's, shared by every
        caller in the process, and stay open too. A call already in flight is not waited
        for: close once the calls you care about have returned.
        """
        if self._closed:
            return
        self._closed = True
        for owned in self._owned:
            owned.close()

    async def aclose(self) -> None:
        """The async twin of `close`: an owned store's connections on this loop close too."""
        if self._closed:
            return
        self._closed = True
        for owned in self._owned:
            aclose = getattr(owned, "aclose", None)
            await aclose() if aclose is not None else owned.close()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    def _open(self) -> None:
        if self._closed:
            raise RouterClosedError(
                f"router {self.name!r} is closed: nothing was sent; build a new Router"
            )

    # -- what the router holds -------------------------------------------------------------
    @property
    def routes(self) -> tuple[Route, ...]:
        """Every route, in the order given (names made unique)."""
        return self._routes

    @property
    def groups(self) -> dict[str, tuple[Route, ...]]:
        """Group name → its routes, in written order."""
        return {g: tuple(c.route for c in cs) for g, cs in self._planner.groups.items()}

    def unusable(self) -> dict[str, str]:
        """Routes no request can use, by name, each with why and what to do about it."""
        return {
            c.name: c.capabilities.why_unknown
            for cs in self._planner.groups.values()
            for c in cs
            if not c.capabilities.known
        }

    def spending(self) -> Spending:
        """The budget's account: spent, reserved, left, calls, and whether it is exact.

        With a shared store that cannot be reached it raises `StoreUnavailableError`
        rather than report a figure it could not read.
        """
        self._open()
        if self._ledger is None:
            raise ConfigError("this router has no budget; build it with budget=Budget(...)")
        return self._ledger.spending()

    def health(self) -> dict[str, Health]:
        """Every route's health record by name (closed and untouched routes included), with
        `rest_left`: the seconds of rest left now."""
        self._open()
        known, now = self._store.all_health(), self._clock.now()
        return {
            r.name: replace(h, rest_left=max(h.rest_until - now, 0.0)) if h.rest_until else h
            for r in self._routes
            for h in (known.get(r.name, Health()),)
        }

    def usage(self) -> dict[str, Window]:
        """Every route's rate window now: requests and tokens in the last minute, calls in
        flight, when the next slot frees (shared through the store)."""
        self._open()
        return dict(self._store.windows([r.name for r in self._routes]))

    def report(self, since: float | None = 3600.0) -> Report:
        """Per route over the last `since` seconds (None: all): requests, success rate,
        p50/p95 latency, cost, and the top skip and failure reasons. Read from the router's
        `AttemptLog` when it has one (every process writing it), else from this process's
        last 2,000 attempts and skips. Prints as a table; an HTML table in Jupyter."""
        log = next((o for o in self._observers if isinstance(o, AttemptLog)), None)
        if log is not None and log.path.exists():
            return read_report(log.path, since)
        return self._history.report(since)

    def resting(self) -> dict[str, float]:
        """Routes resting now, by name, with the seconds of rest left."""
        return {
            name: h.rest_left
            for name, h in self.health().items()
            if h.state == "open" and h.rest_left > 0
        }

    def reset(self, route: str | None = None) -> None:
        """Forget the health of one route, or of all: they are closed and untried again."""
        self._open()
        if route is not None and route not in {r.name for r in self._routes}:
            raise KeyError(f"no route named {route!r}")
        self._store.reset_health(route)

    def preflight(self, *, live: bool = False) -> dict[str, PreflightVerdict]:
        """Ready, Denied(why) or Unknown(why) for every route, before any real request.

        Credentials are checked with LiteLLM's environment validation, counting those the
        route carries under every name LiteLLM reads for its provider; "denied" only when
        a credential is surely missing, "unknown" when its SDK may find one elsewhere (an
        AWS profile, Google's default credentials). With `live=True` a one-token request
        (one word embedded, for an embedding route) is sent to each route, which costs a
        little. With a breaker, a route the *live* check denied rests for the breaker's
        `settled` time; nothing else rests a route.
        """
        self._open()
        verdicts = [
            preflight_route(r, live, embeds_only(self.capabilities(r.name))) for r in self._routes
        ]
        return rest_denied(self._routes, verdicts, self._health, self._store, self._clock.now())

    async def apreflight(self, *, live: bool = False) -> dict[str, PreflightVerdict]:
        """The async twin of `preflight`."""
        self._open()
        checks = (
            asyncio.to_thread(preflight_route, r, live, embeds_only(self.capabilities(r.name)))
            for r in self._routes
        )
        verdicts = await asyncio.gather(*checks)
        return rest_denied(self._routes, verdicts, self._health, self._store, self._clock.now())

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
        budget = self._ledger.budget if self._ledger is not None else None
        found = problems(self._routes, self.unusable(), budget, self._store, max_age_days, today)
        return [*self._notes, *found]

    def capabilities(self, route: str) -> frozenset[str]:
        """What the named route can do, as capability names (the endpoints it serves too)."""
        return self._planner.serves(route)

    # -- the call path every LiteLLM-shaped call takes (drive.face) ---------------------
    def _route(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Routed[Any]:
        spec, plan, call_kwargs = self._planned(endpoint, model, messages, kwargs)
        return calls.call(plan, spec, call_kwargs, self._restart, self._on_restart)

    async def _aroute(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Routed[Any]:
        spec, plan, call_kwargs = self._planned(endpoint, model, messages, kwargs)
        return await calls.acall(plan, spec, call_kwargs, self._restart, self._on_restart)

    def explain(
        self,
        model: str | None = None,
        messages: Any = None,
        *,
        endpoint: str = "chat",
        **kwargs: Any,
    ) -> Explanation:
        """The verdict for every route of the group for this request. Nothing is sent."""
        self._open()
        return self._planner.explain(endpoint_named(endpoint), model, messages, kwargs)

    def _planned(
        self, name: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> tuple[Endpoint, Plan, dict[str, Any]]:
        self._open()
        spec = endpoint_named(name)
        return (spec, *self._planner.plan(spec, model, messages, kwargs))

    def _repr_html_(self) -> str:
        """A table for notebooks: each route with its reach, capabilities, price, health."""
        return overview.as_html(self._planner.groups, self.health())

    def __repr__(self) -> str:
        return overview.as_text(self._planner.groups)
