"""Router: the drop-in face over LiteLLM. It composes the policies and owns none.

`Router.completion` and `Router.acompletion` take LiteLLM's keyword arguments and return
LiteLLM's objects; `model=` names a group. Each call builds a `Plan` (the pure decision
core) and drives it: the sync and async drivers below are the same short loop, one with
`call`, one with `await acall`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from . import transport
from .budget import Budget, Ledger, RequestFacts, Spending, prompt_bound
from .capabilities import resolve
from .clock import Clock, MonotonicClock
from .errors import ConfigError, NoRouteError
from .journey import Explanation, Routed
from .order import Order, OrderContext, Ordering, cheapest
from .plan import Candidate, Plan, Send, explain
from .prices import PriceTable
from .requirements import Requirements
from .route import Route
from .store import InMemoryStore, Store
from .stream import AsyncRoutedStream, RoutedStream

__all__ = ["Router"]

T = TypeVar("T")

# Keywords the router takes out of a call before LiteLLM sees it.
_POLICY_KWARGS = ("on_device", "needs")

# Keywords a caller may not pass: each would let LiteLLM decide what the router decides.
_REFUSED_KWARGS = {
    "api_base": "where a call goes is the route's business: set api_base on the Route",
    "base_url": "where a call goes is the route's business: set api_base on the Route",
    "api_key": "credentials belong to a route: set api_key on the Route",
    "custom_llm_provider": "set custom_llm_provider on the Route",
    "fallbacks": "the router decides fallbacks: list the routes in one group",
    "context_window_fallback_dict": "the router decides fallbacks: list the routes in one group",
    "num_retries": "LiteLLM's retries are off: the router sends one request per attempt",
    "max_retries": "LiteLLM's retries are off: the router sends one request per attempt",
}


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
    """

    def __init__(
        self,
        routes: Iterable[Route],
        *,
        order: Order | str | Ordering = Order.AS_LISTED,
        budget: Budget | None = None,
        store: Store | None = None,
        clock: Clock | None = None,
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
        candidates = [
            Candidate(
                r,
                resolve(r.model, *transport.model_info(r), r.capabilities),
                r.prices.price_for(r.model) if r.prices is not None else None,
            )
            for r in self._routes
        ]
        self._order = _order(order, self._routes)
        if budget is not None and not isinstance(budget, Budget):
            raise ConfigError(f"budget must be a Budget, got {type(budget).__name__}")
        self._store: Store = store if store is not None else InMemoryStore()
        self._ledger = Ledger(budget, self._store) if budget is not None else None
        self._groups: dict[str, tuple[Candidate, ...]] = {}
        self._by_model: dict[str, tuple[Candidate, ...]] = {}
        for c in candidates:
            self._groups[c.route.group] = (*self._groups.get(c.route.group, ()), c)
            self._by_model[c.route.model] = (*self._by_model.get(c.route.model, ()), c)

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
        """The budget's account: spent, reserved, left, calls, and whether it is exact."""
        if self._ledger is None:
            raise ConfigError("this router has no budget; build it with budget=Budget(...)")
        return self._ledger.spending()

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

            def open_stream(send: Send) -> RoutedStream:
                kwargs, strip = _stream_kwargs(call_kwargs, send)
                source = transport.call(send.route, kwargs, group)
                iterator = iter(source)
                first = next(iterator, None)
                if first is None or transport.is_hollow_first_chunk(first):
                    raise transport.stream_cut_error(send.route, "")
                return RoutedStream(source, iterator, first, plan, send, strip_usage=strip)

            stream, send = _drive(plan, open_stream, final=False)
            return Routed(stream, send.route, plan.journey)
        response, send = _drive(plan, lambda s: transport.call(s.route, call_kwargs, group))
        return self._finish(response, send, plan)

    async def aroute(
        self, model: str | None = None, messages: Any = None, **kwargs: Any
    ) -> Routed[Any]:
        """Like `acompletion`, but returns `Routed` (response, route, journey, attempts)."""
        plan, call_kwargs = self._plan(model, messages, kwargs)
        group = plan.group
        if call_kwargs.get("stream"):

            async def open_stream(send: Send) -> AsyncRoutedStream:
                kwargs, strip = _stream_kwargs(call_kwargs, send)
                source = await transport.acall(send.route, kwargs, group)
                iterator = source.__aiter__()
                first = await anext(iterator, None)
                if first is None or transport.is_hollow_first_chunk(first):
                    raise transport.stream_cut_error(send.route, "")
                return AsyncRoutedStream(source, iterator, first, plan, send, strip_usage=strip)

            stream, send = await _adrive(plan, open_stream, final=False)
            return Routed(stream, send.route, plan.journey)

        async def open_(send: Send) -> Any:
            return await transport.acall(send.route, call_kwargs, group)

        response, send = await _adrive(plan, open_)
        return self._finish(response, send, plan)

    def explain(self, model: str | None = None, messages: Any = None, **kwargs: Any) -> Explanation:
        """The verdict for every route of the group for this request. Nothing is sent."""
        group, candidates = self._group(model)
        needs = self._needs(messages, kwargs)
        facts = self._facts({**kwargs, "messages": messages}, explaining=True)
        return explain(group, candidates, needs, self._ordering(group, facts), self._ledger, facts)

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
        _check_call(messages, kwargs)
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
        facts = self._facts(call_kwargs)
        plan = Plan(
            group,
            candidates,
            needs,
            clock=self._clock,
            ordering=self._ordering(group, facts),
            ledger=self._ledger,
            facts=facts,
        )
        return plan, call_kwargs

    def _facts(self, kwargs: Mapping[str, Any], *, explaining: bool = False) -> RequestFacts | None:
        """Measure the request once, and only what a price decision needs: the token count
        orders routes (and explains), the byte bound holds the budget."""
        count = explaining or self._order is Order.CHEAPEST
        if self._ledger is None and not count:
            return None
        image_tokens = self._ledger.budget.image_tokens if self._ledger else 0
        max_tokens = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
        return RequestFacts(
            prompt_tokens=transport.count_tokens(kwargs) if count else 0,
            prompt_bound=prompt_bound(kwargs, image_tokens) if self._ledger else 0,
            max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        )

    def _ordering(
        self, group: str, facts: RequestFacts | None
    ) -> Callable[[Sequence[Candidate]], Sequence[Candidate]] | None:
        order = self._order
        if order is Order.AS_LISTED:
            return None
        if order is Order.CHEAPEST:
            assert facts is not None
            return lambda cs: cheapest(cs, facts)
        context = OrderContext(group, facts, self._clock.now())
        return lambda cs: order.order(cs, context)

    def __repr__(self) -> str:
        lines = [f"Router({len(self._routes)} routes in {len(self._groups)} groups)"]
        for group, cs in self._groups.items():
            lines.append(f"  {group}:")
            lines.extend(
                f"    {c.name}  [{c.route.reach.value}]  {c.capabilities.describe()}" for c in cs
            )
        return "\n".join(lines)


def _drive(plan: Plan, open_: Callable[[Send], T], *, final: bool = True) -> tuple[T, Send]:
    """The sync driver: ask the plan, send, tell it the outcome, until answered or done."""
    last: BaseException | None = None
    while (send := plan.next()) is not None:
        try:
            result = open_(send)
        except Exception as exc:
            fault = transport.classify(exc)
            if fault is None:
                raise
            plan.failed(send, fault)
            last = exc
            continue
        plan.answered(send, transport.usage_of(result) if final else None, final=final)
        return result, send
    raise plan.error(last)


async def _adrive(
    plan: Plan, open_: Callable[[Send], Awaitable[T]], *, final: bool = True
) -> tuple[T, Send]:
    """The async driver: the same loop as `_drive`, awaiting the call."""
    last: BaseException | None = None
    while (send := plan.next()) is not None:
        try:
            result = await open_(send)
        except Exception as exc:
            fault = transport.classify(exc)
            if fault is None:
                raise
            plan.failed(send, fault)
            last = exc
            continue
        plan.answered(send, transport.usage_of(result) if final else None, final=final)
        return result, send
    raise plan.error(last)


def _order(order: Order | str | Ordering, routes: Sequence[Route]) -> Order | Ordering:
    if isinstance(order, Ordering) and not isinstance(order, str):
        return order
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


def _check_call(messages: Any, kwargs: Mapping[str, Any]) -> None:
    """Refuse malformed call arguments before anything is sent, naming the field and fix."""
    if not isinstance(messages, list) or not messages:
        raise ConfigError(
            "messages must be a non-empty list of {'role': ..., 'content': ...} dicts, "
            f"got {type(messages).__name__}"
        )
    for i, m in enumerate(messages):
        if not (isinstance(m, Mapping) or hasattr(m, "role")):
            raise ConfigError(
                f"messages[{i}] must be a dict with 'role' and 'content', got {type(m).__name__}"
            )
    for key, why in _REFUSED_KWARGS.items():
        if key in kwargs:
            raise ConfigError(f"{key}= is not accepted by the router: {why}")
    max_tokens = kwargs.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0
    ):
        raise ConfigError(f"max_tokens must be a positive integer, got {max_tokens!r}")
