"""Router: the drop-in face over LiteLLM. It composes the policies and owns none.

`Router.completion`, `embedding`, `responses` and `text_completion` (and their async twins)
take LiteLLM's keyword arguments and return LiteLLM's objects; `model=` names a group. Each
call is planned by the `Planner` (`drive.planning`) into a `Plan`, the pure decision core, and
driven by the loops in `drive.loops` (or opened as a stream by `drive.stream`): one path for
every endpoint, which is data (`endpoints/`). What the router runs under and how that changes
is its `Lifecycle` (`config.lifecycle`); what it holds is read through its `Inspection`
(`config.inspection`): the router hands those calls to them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .config.inspection import Inspection
from .config.lifecycle import Lifecycle
from .core.journey import Routed
from .drive import face
from .drive.preflight import PreflightVerdict
from .drive.stream import StreamRestart
from .ground.clock import Clock
from .ground.errors import ConfigError
from .ground.handing import handed
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

class Router:
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
        budgets: More budgets, each over its period and scope (`Budget("5.00",
            period="day", per="user")`, `tag=`, `route=`, ...): a call reserves its worst
            case against every one it falls under, at once; a route's budget skips the
            route when it cannot take the call (see `Budget`).
        breaker: `Breaker()` by default (a failing route rests 5 s, doubling to 15 s, so a
            recovered one is asked again within 15 s); `None` for none, or a mapping of
            its fields.
        retry: Retries on the same route (`Retry(...)`); none by default.
        deadline: Seconds for the whole request, across routes and retries (a call's own
            `deadline=` overrides it); none by default.
        store: Where health, spend and windows live: this process by default,
            `SQLiteStore(path)` (kept across restarts, shared by the processes of one
            machine), or `RedisStore(url)`, shared by every process whose router has the
            same `name`.
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
        budgets: Sequence[Budget] = (),
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
        self._life = Lifecycle(
            self,
            {
                "routes": routes,
                "name": name,
                "order": order,
                "budget": budget,
                "budgets": budgets,
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
            },
        )
        self._view = Inspection(self._life)
        self._life.attach(self._life.now.observers)

    @property
    def name(self) -> str:
        """The router's name: routers of one name share their store's health and spend."""
        return self._life.now.name

    @classmethod
    def from_config(cls, config: str | Path | Mapping[str, Any], **overrides: Any) -> Router:
        """Build a router from a policy file (YAML or TOML), a LiteLLM proxy `config.yaml`,
        or a mapping of either shape.

        Every error names its place in the file and the fix. An `os.environ/NAME` secret
        whose variable is not set is an error here; `policy-router check` lists them all.
        Keyword arguments (`clock=`, `observers=`, ...) are passed to the constructor.
        """
        from .config.policy_file import load

        return cls._loaded(load(config), overrides, source=config)

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
    def _loaded(cls, loaded: Any, overrides: Mapping[str, Any], source: Any = None) -> Router:
        if loaded.missing:
            raise ConfigError("; ".join(loaded.missing))
        router = cls(loaded.routes, **{**loaded.policies, **overrides})
        router._life.adopt(loaded, overrides, source)
        return router

    # -- its life: changes while it runs, and its end (config.lifecycle) -------------------
    reconfigure = handed("_life", Lifecycle.reconfigure)
    on_reconfigure = handed("_life", Lifecycle.on_reconfigure)
    reload = handed("_life", Lifecycle.reload)
    close = handed("_life", Lifecycle.close)

    async def aclose(self) -> None:
        """The async twin of `close`: an owned store's connections on this loop close too."""
        await self._life.aclose()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- what the router holds (config.inspection) -----------------------------------------
    @property
    def routes(self) -> tuple[Route, ...]:
        """Every route, in the order given (names made unique)."""
        return self._life.now.routes

    @property
    def groups(self) -> dict[str, tuple[Route, ...]]:
        """Group name → its routes, in written order."""
        return {g: tuple(c.route for c in cs) for g, cs in self._life.now.planner.groups.items()}

    unusable = handed("_view", Inspection.unusable)
    spending = handed("_view", Inspection.spending)
    budgets = handed("_view", Inspection.budgets)
    set_budget = handed("_view", Inspection.set_budget)
    health = handed("_view", Inspection.health)
    usage = handed("_view", Inspection.usage)
    report = handed("_view", Inspection.report)
    resting = handed("_view", Inspection.resting)
    reset = handed("_view", Inspection.reset)
    preflight = handed("_view", Inspection.preflight)
    check = handed("_view", Inspection.check)
    scores = handed("_view", Inspection.scores)
    flush_metrics = handed("_view", Inspection.flush_metrics)
    model_info = handed("_view", Inspection.model_info)
    capabilities = handed("_view", Inspection.capabilities)

    explain = handed("_view", Inspection.explain)

    async def apreflight(self, *, live: bool = False) -> dict[str, PreflightVerdict]:
        """The async twin of `preflight`."""
        return await self._view.apreflight(live=live)

    def _repr_html_(self) -> str:
        """A table for notebooks: each route with its reach, capabilities, price, health."""
        return overview.as_html(self._life.now.planner.groups, self.health())

    def __repr__(self) -> str:
        return overview.as_text(self._life.now.planner.groups)

    # -- the calls, each mirroring the LiteLLM function of its name ------------------------
    def completion(self, model: str | None = None, messages: Any = None, **kwargs: Any) -> Any:
        """Route a `litellm.completion` call: a `ModelResponse`, or a `RoutedStream`."""
        return self._route("chat", model, messages, kwargs).response

    async def acompletion(
        self, model: str | None = None, messages: Any = None, **kwargs: Any
    ) -> Any:
        """Route a `litellm.acompletion` call: a `ModelResponse`, or an `AsyncRoutedStream`."""
        return (await self._aroute("chat", model, messages, kwargs)).response

    def embedding(self, model: str | None = None, input: Any = None, **kwargs: Any) -> Any:
        """Route a `litellm.embedding` call: an `EmbeddingResponse`."""
        return self._route("embedding", model, None, {**kwargs, "input": input}).response

    async def aembedding(self, model: str | None = None, input: Any = None, **kwargs: Any) -> Any:
        """Route a `litellm.aembedding` call: an `EmbeddingResponse`."""
        return (await self._aroute("embedding", model, None, {**kwargs, "input": input})).response

    def responses(self, input: Any = None, model: str | None = None, **kwargs: Any) -> Any:
        """Route a `litellm.responses` call: a `ResponsesAPIResponse`, or with
        `stream=True` a `RoutedStream` of its events."""
        return self._route("responses", model, None, {**kwargs, "input": input}).response

    async def aresponses(self, input: Any = None, model: str | None = None, **kwargs: Any) -> Any:
        """Route a `litellm.aresponses` call (an `AsyncRoutedStream` of events when
        streamed)."""
        return (await self._aroute("responses", model, None, {**kwargs, "input": input})).response

    def text_completion(self, prompt: Any = None, model: str | None = None, **kwargs: Any) -> Any:
        """Route a `litellm.text_completion` call: a `TextCompletionResponse` or a stream."""
        return self._route("completion", model, None, {**kwargs, "prompt": prompt}).response

    async def atext_completion(
        self, prompt: Any = None, model: str | None = None, **kwargs: Any
    ) -> Any:
        """Route a `litellm.atext_completion` call."""
        return (
            await self._aroute("completion", model, None, {**kwargs, "prompt": prompt})
        ).response

    async def aanthropic_messages(self, **kwargs: Any) -> Any:
        """Route a `litellm.anthropic_messages` call: Anthropic's Messages API (`model=` a
        group, `messages`, `max_tokens`, `system`, `tools`, `thinking`, `stream`, ...) over
        any route that serves chat, LiteLLM reaching each provider its own way. Returns
        Anthropic's response (a dict), or with `stream=True` an `AsyncRoutedStream` of its
        server-sent events, as bytes. Async only, as LiteLLM's own function is."""
        return (await self._aroute("messages", kwargs.pop("model", None), None, kwargs)).response

    async def anthropic_messages(self, **kwargs: Any) -> Any:
        """`aanthropic_messages` by the name LiteLLM's Router gives it (async too)."""
        return await self.aanthropic_messages(**kwargs)

    def route(
        self,
        model: str | None = None,
        messages: Any = None,
        *,
        endpoint: str = "chat",
        **kwargs: Any,
    ) -> Routed[Any]:
        """Like the call of `endpoint` ("chat", "embedding", "responses", "completion"), but
        returns `Routed`: the response, the route that answered, the journey, the attempts."""
        return self._route(endpoint, model, messages, kwargs)

    async def aroute(
        self,
        model: str | None = None,
        messages: Any = None,
        *,
        endpoint: str = "chat",
        **kwargs: Any,
    ) -> Routed[Any]:
        """The async twin of `route`."""
        return await self._aroute(endpoint, model, messages, kwargs)

    def batch_completion(
        self,
        model: str | None = None,
        messages: Any = None,
        *,
        max_concurrency: int = 8,
        progress: bool = True,
        **kwargs: Any,
    ) -> list[Any]:
        """Route many chat requests, as `litellm.batch_completion` takes them: `messages`
        is a list with one list of messages per request; every other keyword is shared.

        Returns one result per request, in input order: the `ModelResponse`, or in the
        place of a request that failed its exception object (as LiteLLM does). At most
        `max_concurrency` requests are in flight (LiteLLM's `max_workers=` is read as the
        same). A progress bar (`tqdm.auto`: a widget in a notebook, a line in a terminal)
        shows done / failed / spent; `progress=False` turns it off. The budget, breaker
        and rate limits hold across the batch as across any calls; `deadline=` is the whole
        batch's, and a request not started when it has passed is not sent (its place holds
        a `DeadlineExceededError`). When the budget refuses a request, the batch stops: the
        requests not yet started are not sent, each place holding an `OverBudgetError`.
        Streams are refused: a batch returns whole answers.
        """
        self._life.ensure_open()  # a closed router refuses the batch, not each request in it
        batch = face.batch_of(model, messages, max_concurrency, progress, kwargs, self._life.now.clock)
        return batch.run(lambda call: self._route("chat", model, *face.split(call)))

    async def abatch_completion(
        self,
        model: str | None = None,
        messages: Any = None,
        *,
        max_concurrency: int = 8,
        progress: bool = True,
        **kwargs: Any,
    ) -> list[Any]:
        """The async twin of `batch_completion`: `max_concurrency` tasks on this loop."""
        self._life.ensure_open()  # a closed router refuses the batch, not each request in it
        batch = face.batch_of(model, messages, max_concurrency, progress, kwargs, self._life.now.clock)
        return await batch.arun(lambda call: self._aroute("chat", model, *face.split(call)))

    # -- the one call path every LiteLLM-shaped call takes (drive.face) -------------------
    def _route(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Routed[Any]:
        now = self._life.now  # read once: the request keeps this configuration to its end
        if self._life.closed:
            self._life.ensure_open()  # raises
        return face.route(now.planner, now.restart, now.on_restart, endpoint, model, messages, kwargs)

    def _aroute(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Awaitable[Routed[Any]]:
        now = self._life.now
        if self._life.closed:
            self._life.ensure_open()
        return face.aroute(now.planner, now.restart, now.on_restart, endpoint, model, messages, kwargs)
