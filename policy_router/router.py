"""Router: the drop-in face over LiteLLM. It composes the policies and owns none.

`Router.completion`, `embedding`, `responses` and `text_completion` (and their async twins)
take LiteLLM's keyword arguments and return LiteLLM's objects; `model=` names a group. Each
call is planned by the `Planner` (`drive.planning`) into a `Plan`, the pure decision core, and
driven by the loops in `drive.loops` (or opened as a stream by `drive.stream`): one path for
every endpoint, which is data (`endpoints/`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .config.assembly import Assembly, assemble
from .config.changes import Changes, Reconfigured, diff, forgotten
from .config.inspection import Inspection
from .core.journey import Explanation, Routed
from .drive import calls
from .drive.explaining import explanation
from .drive.express import Call, Lane
from .drive.face import LiteLLMFace
from .drive.stream import StreamRestart
from .endpoints import endpoint as endpoint_named
from .ground.clock import Clock
from .ground.errors import ConfigError, RouterClosedError
from .ground.route import Route
from .observe import overview
from .observe.metrics import MetricsStore
from .observe.observers import Observer
from .policies.breaker import Breaker
from .policies.budget import Budget
from .policies.hedge import Hedge
from .policies.order import Order, Ordering
from .policies.retry import Retry
from .policies.score import Score
from .state.store import Store

__all__ = ["Router"]


class Router(LiteLLMFace, Inspection):
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

    Args:
        routes: The routes, each in its `group` (the `model=` a call names).
        name: Routers of one name share a store's health, spend and windows.
        order: How a group's routes are ordered (`Order`, its name, your `Ordering`), or a
            mapping of group to one.
        budget: The most the router may spend (`Budget("5.00")`), refused before sending.
        breaker: `Breaker()` by default (a failing route rests 5 s, doubling to 15 s, so a
            recovered one is asked again within 15 s); `None` for none, or a mapping of
            its fields.
        retry: Retries on the same route (`Retry(...)`); none by default.
        deadline: Seconds for the whole request, across routes and retries (a call's own
            `deadline=` overrides it); none by default.
        store: Where health, spend and windows live: this process by default, or
            `RedisStore(url)`, shared by every process whose router has the same `name`.
        observers: Callables told every skip, attempt, wait and rest (see `events`).
        clock: The clock of rests, windows and deadlines (`ManualClock` in tests).
        stream_failure: `"raise"` (a stream that dies after its first chunk raises inside
            it) or `"restart"` (it starts again on the next route; needs `on_restart`).
        on_restart: Told `StreamRestart(...)` before a restarted stream's first new chunk.
        quiet_litellm: Set `litellm.suppress_debug_info`, so skips print no LiteLLM banner.
        wait_for_capacity: A route with `rpm`/`tpm` is skipped while its window is full;
            with this (or per call), a request whose every route is full waits for the
            earliest slot instead, never past the deadline.
        metrics: `SQLiteMetrics`, `DuckDBMetrics` or `PostgresMetrics`: every attempt is
            recorded there, off the request path; `Order.SCORE` ranks by that history.
        metrics_scope: The scope its rows are written and read under (default: `name`).
        score: How `Order.SCORE` weighs that history (default `Score()`).
        hedge: `Hedge(after="p95")`, or a mapping of group to one, or per call: an attempt
            with no first chunk after the delay is joined by one on the next route, and
            the first answer wins.

    Raises:
        ConfigError: an argument is wrong (the message names it and the fix), or LiteLLM's
            own retries or fallbacks are set globally; nothing is sent.
    """

    def __init__(
        self,
        routes: Iterable[Route],
        *,
        name: str = "default",
        order: Order | str | Ordering | Mapping[str, Order | str | Ordering] = Order.AS_LISTED,
        budget: Budget | None = None,
        breaker: Breaker | Mapping[str, Any] | None = Breaker(),  # noqa: B008 (immutable)
        retry: Retry | None = None,
        deadline: float | None = None,
        store: Store | None = None,
        observers: Sequence[Observer] | None = None,
        clock: Clock | None = None,
        stream_failure: Literal["raise", "restart"] = "raise",
        on_restart: Callable[[StreamRestart], None] | None = None,
        quiet_litellm: bool = True,
        wait_for_capacity: bool = False,
        metrics: MetricsStore | None = None,
        metrics_scope: str | None = None,
        score: Score | None = None,
        hedge: Hedge | Mapping[str, Hedge | None] | None = None,
    ) -> None:
        self._lock = threading.Lock()  # one reconfiguration at a time
        self._notes: tuple[str, ...] = ()
        self._source: tuple[Any, Mapping[str, Any]] | None = None  # from_config's file
        self._closed = False
        self._owned: list[Any] = []  # what the router created, and so closes (from_config)
        self._listeners: list[Callable[[Router], None]] = []  # told after each reconfigure
        self._now = assemble(
            {
                "routes": routes,
                "name": name,
                "order": order,
                "budget": budget,
                "breaker": breaker,
                "retry": retry,
                "deadline": deadline,
                "store": store,
                "observers": observers,
                "clock": clock,
                "stream_failure": stream_failure,
                "on_restart": on_restart,
                "quiet_litellm": quiet_litellm,
                "wait_for_capacity": wait_for_capacity,
                "metrics": metrics,
                "metrics_scope": metrics_scope,
                "score": score,
                "hedge": hedge,
            }
        )
        self._attach(self._now.observers)

    def _attach(self, observers: Sequence[Observer]) -> None:
        for observer in observers:
            attach = getattr(observer, "attach", None)
            if callable(attach):
                attach(self)  # an observer that reads the router (OTelObserver's gauges)

    @property
    def name(self) -> str:
        """The router's name: routers of one name share their store's health and spend."""
        return self._now.name

    @property
    def _clock(self) -> Clock:
        return self._now.clock

    @classmethod
    def from_config(cls, config: str | Path | Mapping[str, Any], **overrides: Any) -> Router:
        """Build a router from a policy file (YAML or TOML), a LiteLLM proxy `config.yaml`,
        or a mapping of either shape.

        Every error names its place in the file and the fix. An `os.environ/NAME` secret
        whose variable is not set is an error here; `policy-router check` lists them all.
        Keyword arguments (`clock=`, `observers=`, ...) are passed to the constructor.
        """
        from .config.policy_file import load

        router = cls._loaded(load(config), overrides)
        router._source = (config, dict(overrides))
        return router

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
        for made in ("store", "metrics"):  # built from the file's URL or path: the router's
            if made in loaded.policies and made not in overrides:
                router._owned.append(loaded.policies[made])
        return router

    # -- changing a running router ---------------------------------------------------------
    def reconfigure(self, **changes: Any) -> Changes:
        """Change any constructor argument (`routes=`, `order=`, `budget=`, `breaker=`, ...)
        while the router runs, keeping what it learned; returns what changed.

        Everything is validated first, with the constructor's errors: a change that fails
        leaves the router exactly as it was. The swap is atomic: a request in flight
        finishes under the configuration it started with, the next one sees the new one.
        Health, rate windows and spend stay in the store, by route name and budget name;
        a group whose routes and ordering are unchanged keeps its round-robin turn, and an
        unchanged ordering keeps its object (FASTEST's statistics). A route whose id is
        gone is forgotten (its health reset); a new id starts fresh, and a renamed route
        (same id) keeps its history. Observers are told
        `Reconfigured(changes)`.
        """
        self._open()
        with self._lock:
            before = self._now
            after = assemble({**before.args, **changes}, before)
            found = diff(before.routes, before.args["order"], after.routes, after.args["order"])
            for gone in forgotten(before.routes, after.routes):
                if before.health is not None:
                    before.health.retired.add(gone)  # requests in flight write nothing of it
                after.store.reset_health(gone)
            self._now = after
            if after.observers is not before.observers:
                self._attach([o for o in after.observers if o not in before.observers])
        if before.recorder is not None and before.recorder is not after.recorder:
            before.recorder.stop()  # what it buffered is written to the store it had
        after.emit(Reconfigured(found))
        for listener in list(self._listeners):
            listener(self)
        return found

    def on_reconfigure(self, listener: Callable[[Router], None]) -> Callable[[], None]:
        """Call `listener(router)` after every `reconfigure` (and `reload`) has taken
        effect, in the thread that reconfigured; returns the function that stops it.

        For what mirrors the router's configuration elsewhere (the LiteLLM provider keeps
        LiteLLM's model info of each group current with it). A listener that raises
        fails the `reconfigure` call after the change has taken effect."""
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop

    def reload(self) -> Changes:
        """Read the file this router was built from (`Router.from_config`) again and apply it
        with `reconfigure`. A store (or metrics store) the file names is kept while its
        address is unchanged."""
        from .config.policy_file import load

        if self._source is None:
            raise ConfigError("reload() needs a router built with Router.from_config(path)")
        config, overrides = self._source
        loaded = load(config)
        if loaded.missing:
            raise ConfigError("; ".join(loaded.missing))
        policies = {**loaded.policies, **overrides}
        for kind in ("store", "metrics"):
            built, held = policies.get(kind), self._now.args[kind]
            if built is not None and repr(built) == repr(held):
                built.close()  # the same address: keep the store the router holds
                policies[kind] = held
        found = self.reconfigure(routes=loaded.routes, **policies)
        self._notes = tuple(loaded.notes)
        return found

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
        if self._now.recorder is not None:
            self._now.recorder.stop()
        for owned in self._owned:
            owned.close()

    async def aclose(self) -> None:
        """The async twin of `close`: an owned store's connections on this loop close too."""
        if self._closed:
            return
        self._closed = True
        if self._now.recorder is not None:
            await asyncio.to_thread(self._now.recorder.stop)
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
        return self._now.routes

    @property
    def groups(self) -> dict[str, tuple[Route, ...]]:
        """Group name → its routes, in written order."""
        return {g: tuple(c.route for c in cs) for g, cs in self._now.planner.groups.items()}

    # -- the call path every LiteLLM-shaped call takes (drive.face) ---------------------
    def _route(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Routed[Any]:
        now, lane, call_kwargs, timeout, call = self._read(endpoint, model, messages, kwargs)
        if lane is not None:
            return lane.call(call_kwargs, timeout, call, now.planner, now.restart, now.on_restart)
        assert call is not None  # (no lane: the call was read in full)
        plan = now.planner.build(call)
        return calls.call(plan, call.endpoint, call_kwargs, now.restart, now.on_restart)

    def _aroute(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Awaitable[Routed[Any]]:
        # A plain function returning the call's coroutine: read and checked now, by the
        # caller's own coroutine, and one frame fewer for every resumption of the call.
        now, lane, call_kwargs, timeout, call = self._read(endpoint, model, messages, kwargs)
        if lane is not None:
            return lane.acall(call_kwargs, timeout, call, now.planner, now.restart, now.on_restart)
        assert call is not None
        plan = now.planner.build(call)
        return calls.acall(plan, call.endpoint, call_kwargs, now.restart, now.on_restart)

    def _read(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> tuple[Assembly, Lane | None, dict[str, Any], float | None, Call | None]:
        """The call read and checked under the configuration it keeps to its end: the
        express lane when it takes one, what LiteLLM is to get, the call's own timeout, and
        the `Call` (None for a plain chat call on its lane, read in one pass)."""
        now = self._now  # read once: the request keeps this configuration to its end
        if self._closed:
            self._open()  # raises
        planner = now.planner
        lane = planner.express(endpoint, model, messages, kwargs)
        if lane is not None:  # the common call (`Planner.express`)
            return now, lane, {**kwargs, "messages": messages}, None, None
        call = planner.prepare(endpoint_named(endpoint), model, messages, kwargs)
        return now, planner.lane(call), call.call_kwargs, call.timeout, call

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
        return explanation(self._now.planner, endpoint_named(endpoint), model, messages, kwargs)

    def _repr_html_(self) -> str:
        """A table for notebooks: each route with its reach, capabilities, price, health."""
        return overview.as_html(self._now.planner.groups, self.health())

    def __repr__(self) -> str:
        return overview.as_text(self._now.planner.groups)
