"""The router as a LiteLLM provider: every caller of `litellm.completion`, framework or not.

    from policy_router.integrations.litellm import register
    register(router)                                  # once, at start-up
    litellm.completion(model="policy_router/smart", messages=msgs, on_device=True)

DSPy (`dspy.LM("policy_router/smart")`), smolagents (`LiteLLMModel`), CrewAI, LangChain's
`ChatLiteLLM` and every agent that takes a LiteLLM model string then route through the
router's policy: group `smart`, its requirements, floor, budget, breaker and deadline.
`register` adds one entry to LiteLLM's `custom_provider_map` (the one global written here,
and only when you call it); the user's own custom providers stay.

What crosses the bridge:

- `completion`, `acompletion` and their streams: the router's own `ModelResponse` and
  `ModelResponseStream` chunks (tool calls and usage included); `embedding`/`aembedding`.
  LiteLLM carries `text_completion` and `responses` to a custom provider through its chat
  bridge, so those arrive here as chat requests.
- The policy keywords (`on_device=True`, `needs=`, `deadline=`) pass through a framework's
  extra kwargs; the journey is on `response._hidden_params["policy_router"]`.
- A request the router refused before sending anything (no route can serve it, the budget,
  the floor, every route resting) reaches the framework as `RefusedBeforeSending`, a
  `litellm.BadRequestError`: a 400, which LiteLLM's and the frameworks' retry loops do not
  retry, with the router's own error as `__cause__` and the journey as `.journey`.
- A stream starts when LiteLLM calls the provider, not at its first iteration: every error
  before the first chunk (a refusal, every route at its rate limit, the last route's own
  429) raises from `litellm.completion(..., stream=True)` in its own class, as the same call
  unstreamed does. LiteLLM wraps an error raised inside a stream as a 503
  `MidStreamFallbackError`, which is why none is left for the first iteration.
- LiteLLM's callbacks see each call once: the router's attempts are made with LiteLLM's
  `no-log`, so a success callback fires for the `policy_router/<group>` call alone, and its
  `response_cost` is what the router charged the whole request (every attempt's cost, the
  journey's), in USD; a route the router fell through from is no failure event of the call.
  Under a router that counts in another currency, LiteLLM's own estimate stays.
- `register` tells LiteLLM what each group can do (`litellm.register_model`): tools,
  vision, response schemas, reasoning and the rest are what at least one of the group's
  routes can do (the router picks that route), the context window the largest of them, the
  price the cheapest route's as an estimate. `litellm.supports_function_calling(
  "policy_router/<group>")` then says True where a route has tools, so frameworks that ask
  (DSPy's native function calling) send them. `reconfigure` keeps it current; `unregister`
  takes it away.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import litellm
from litellm.exceptions import BadRequestError
from litellm.llms.custom_llm import CustomLLM
from litellm.utils import custom_llm_setup

from ..ground.errors import ConfigError, NoRouteError, PolicyRouterError, RateLimitedError
from ..router import Router

__all__ = ["PROVIDER", "RefusedBeforeSending", "RouterProvider", "register", "unregister"]

PROVIDER = "policy_router"

# LiteLLM's own defaults, which say nothing the caller chose: not forwarded.
_DEFAULT_TIMEOUTS = (600.0, 6000.0)
# Retries are the framework's (outside) or the router's (`retry=`): LiteLLM's are off.
_DROPPED = frozenset({"max_retries", "num_retries", "stream", "stream_options"})
# The attempts are not the caller's calls: LiteLLM's callbacks hear the outer call alone.
_UNLOGGED = {"no-log": True}
_END = object()


class RefusedBeforeSending(BadRequestError):
    """The router refused the request before anything was sent (see the module docstring).

    A `litellm.BadRequestError`, so an outer retry loop does not send it again; `.journey`
    says why each route was skipped, and `__cause__` is the router's own error
    (`NoRouteError`, `OverBudgetError`, `AllRestingError`, `ConfigError`)."""

    def __init__(self, error: PolicyRouterError, model: str) -> None:
        super().__init__(message=str(error), model=model, llm_provider=PROVIDER)
        self.journey = error.journey
        self.__cause__ = error


def _refusal(error: PolicyRouterError, model: str) -> RefusedBeforeSending | None:
    """What the router's refusal becomes for LiteLLM, or None to raise it as it is.

    A rate limit stays a `litellm.RateLimitError` (with `retry_after`): backing off and
    trying again is what it asks for. Every other refusal would be refused again."""
    if isinstance(error, NoRouteError | ConfigError) and not isinstance(error, RateLimitedError):
        return RefusedBeforeSending(error, model)
    return None


@contextmanager
def _as_litellm(model: str) -> Iterator[None]:
    """Raise the router's refusals as LiteLLM errors (see `_refusal`); the rest as they are."""
    try:
        yield
    except PolicyRouterError as error:
        refused = _refusal(error, model)
        if refused is None:
            raise
        raise refused from error


class RouterProvider(CustomLLM):
    """LiteLLM's `CustomLLM` in front of one router: `model` is the group name.

    LiteLLM calls every method with keyword arguments; each takes the few it reads and
    ignores the rest (hence the `override` ignores: the parameters are the same by name).
    `streaming` and `astreaming` are plain functions that start the router's stream and
    hand LiteLLM its chunks (see the module docstring); LiteLLM calls both from the worker
    thread its `completion` runs on, so `astreaming` starts the stream there, and the
    chunks reach the caller's event loop through a thread hop each."""

    def __init__(self, router: Router) -> None:
        super().__init__()
        self.router = router

    @staticmethod
    def _kwargs(optional_params: Mapping[str, Any], timeout: Any, logging_obj: Any = None) -> dict[str, Any]:
        kwargs = {k: v for k, v in optional_params.items() if k not in _DROPPED}
        if isinstance(timeout, int | float) and float(timeout) not in _DEFAULT_TIMEOUTS:
            kwargs.setdefault("timeout", timeout)
        # LiteLLM maps a custom provider's parameters as an OpenAI-like one's, which drops
        # `user` (litellm 1.110.2); it keeps it in the call's logging details only.
        user = getattr(logging_obj, "model_call_details", {}).get("user")
        if isinstance(user, str) and user:
            kwargs.setdefault("user", user)
        kwargs.update(_UNLOGGED)
        return kwargs

    def completion(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, logging_obj: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            response = self.router.completion(
                model=model, messages=messages, **self._kwargs(optional_params, timeout, logging_obj)
            )
        _charge(logging_obj, response)
        return response

    async def acompletion(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, logging_obj: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            response = await self.router.acompletion(
                model=model, messages=messages, **self._kwargs(optional_params, timeout, logging_obj)
            )
        _charge(logging_obj, response)
        return response

    def streaming(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, logging_obj: Any = None, **__: Any,
    ) -> Iterator[Any]:
        with _as_litellm(model):
            stream = self.router.completion(
                model=model, messages=messages, stream=True, **self._kwargs(optional_params, timeout, logging_obj)
            )
        return _chunks(stream)

    def astreaming(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, logging_obj: Any = None, **__: Any,
    ) -> AsyncIterator[Any]:
        with _as_litellm(model):
            stream = self.router.completion(
                model=model, messages=messages, stream=True, **self._kwargs(optional_params, timeout, logging_obj)
            )
        return _AsyncChunks(stream)

    def embedding(  # type: ignore[override]
        self, model: str, input: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, logging_obj: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            response = self.router.embedding(
                model=model, input=input, **self._kwargs(optional_params, timeout, logging_obj)
            )
        _charge(logging_obj, response)
        return response

    async def aembedding(  # type: ignore[override]
        self, model: str, input: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, logging_obj: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            response = await self.router.aembedding(
                model=model, input=input, **self._kwargs(optional_params, timeout, logging_obj)
            )
        _charge(logging_obj, response)
        return response


def _usd(journey: Any) -> float | None:
    """What the router charged the request (every attempt's cost), in USD; None when it
    knows no cost (no prices) or counts in another currency."""
    cost = getattr(journey, "cost", None)
    if cost is None or cost.currency != "USD":
        return None
    return float(cost.micros) / 1_000_000


def _charge(logging_obj: Any, response: Any) -> None:
    """Tell LiteLLM's logging of the outer call what the router charged the request, so
    its callbacks' `response_cost` is the router's spend, and put it in the response's
    `_hidden_params["response_cost"]`, where callers that keep a history read it (DSPy's
    `lm.history`); both left to LiteLLM's own estimate when `_usd` knows none, or
    LiteLLM's logging object lacks the hook."""
    usd = _usd(_journey_of(response))
    _stamp(response, _journey_of(response))
    record = getattr(logging_obj, "record_finalized_cost", None)
    if usd is None or record is None:
        return
    from litellm.litellm_core_utils.llm_cost_calc.finalization import finalize_cost

    record(finalize_cost(usd, None))


def _stamp(first: Any, journey: Any) -> None:
    """A stream's cost, known only at its end, written where LiteLLM reads it when it logs
    the whole stream: the first chunk's hidden params, which the response it assembles
    from the chunks takes (LiteLLM keeps that dict by reference, measured with 1.110.2)."""
    usd = _usd(journey)
    hidden = getattr(first, "_hidden_params", None)
    if usd is not None and isinstance(hidden, dict):
        hidden["response_cost"] = usd


def _journey_of(response: Any) -> Any:
    hidden = getattr(response, "_hidden_params", None)
    return hidden.get("policy_router") if isinstance(hidden, Mapping) else None


def _chunks(stream: Any) -> Iterator[Any]:
    """The router's stream's chunks; at its end the request's cost is stamped for LiteLLM."""
    first = None
    with stream:
        for chunk in stream:
            if first is None:
                first = chunk
            yield chunk
    _stamp(first, stream.journey)


class _AsyncChunks:
    """A sync router stream read from an event loop: each chunk is read on a worker thread,
    so a slow provider never blocks the loop. Closing it (`aclose`, or the loop's own
    shutdown of async generators) closes the router's stream."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._first: Any = None
        self._done = False

    def __aiter__(self) -> _AsyncChunks:
        return self

    async def __anext__(self) -> Any:
        if self._done:
            raise StopAsyncIteration
        try:
            chunk = await asyncio.to_thread(next, self._stream, _END)
        except BaseException:
            await self.aclose()
            raise
        if chunk is _END:
            self._done = True
            self._stream.close()
            _stamp(self._first, self._stream.journey)
            raise StopAsyncIteration
        if self._first is None:
            self._first = chunk
        return chunk

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            await asyncio.to_thread(self._stream.close)


# provider -> (the group names whose model info it told LiteLLM, how to stop hearing of
# the router's reconfigurations): what `unregister` takes away.
_TOLD: dict[str, tuple[set[str], Callable[[], None]]] = {}


def _tell_litellm(router: Router, provider: str, told: set[str]) -> None:
    """LiteLLM's model info of every group of `router` as `provider/<group>`, replacing what
    was told before (a group gone is taken away)."""
    groups = set(router.groups)
    for gone in told - groups:
        litellm.model_cost.pop(f"{provider}/{gone}", None)
    litellm.register_model({f"{provider}/{g}": router.model_info(g, provider) for g in groups})
    told.clear()
    told.update(groups)


def register(router: Router, provider: str = PROVIDER) -> RouterProvider:
    """Route `litellm.completion(model="<provider>/<group>")` through `router`, and tell
    LiteLLM what each group can do (see the module docstring), kept current on the router's
    `reconfigure`.

    Registering again under the same name replaces the earlier router (the last wins);
    other custom providers in `litellm.custom_provider_map` are kept. The name must not be
    one of LiteLLM's own providers, which LiteLLM would keep serving itself."""
    if not isinstance(router, Router):
        raise ConfigError(f"register needs a Router, got {type(router).__name__}")
    if not isinstance(provider, str) or not provider or "/" in provider:
        raise ConfigError(f"provider must be a name without '/', got {provider!r}")
    if provider in litellm.provider_list and provider not in litellm._custom_providers:
        raise ConfigError(
            f"provider {provider!r} is one of LiteLLM's own; pick another name, such as "
            f"{PROVIDER!r}"
        )
    _forget(provider)
    handler = RouterProvider(router)
    kept = [e for e in litellm.custom_provider_map if e.get("provider") != provider]
    litellm.custom_provider_map = [*kept, {"provider": provider, "custom_handler": handler}]
    # LiteLLM learns a custom provider's name at its first call; until then its
    # `get_supported_openai_params` knows none of its parameters, and a framework that asks
    # first (DSPy's JSON adapter, for `response_format`) sends none of them.
    custom_llm_setup()  # type: ignore[no-untyped-call]
    told: set[str] = set()
    _tell_litellm(router, provider, told)
    stop = router.on_reconfigure(lambda r: _tell_litellm(r, provider, told))
    _TOLD[provider] = (told, stop)
    return handler


def _forget(provider: str) -> None:
    """Take away the model info told for `provider` and stop following its router."""
    told, stop = _TOLD.pop(provider, (set(), lambda: None))
    stop()
    for group in told:
        litellm.model_cost.pop(f"{provider}/{group}", None)


def unregister(provider: str = PROVIDER) -> bool:
    """Stop routing `<provider>/...` through a router, and take away the model info
    `register` told LiteLLM; False when none was registered. Other custom providers are
    kept."""
    _forget(provider)
    before = len(litellm.custom_provider_map)
    litellm.custom_provider_map = [
        e for e in litellm.custom_provider_map if e.get("provider") != provider
    ]
    if provider in litellm._custom_providers:
        litellm._custom_providers.remove(provider)
    if provider in litellm.provider_list:
        litellm.provider_list.remove(provider)
    return len(litellm.custom_provider_map) < before
