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
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import litellm
from litellm.exceptions import BadRequestError
from litellm.llms.custom_llm import CustomLLM

from ..ground.errors import ConfigError, NoRouteError, PolicyRouterError, RateLimitedError
from ..router import Router

__all__ = ["PROVIDER", "RefusedBeforeSending", "RouterProvider", "register", "unregister"]

PROVIDER = "policy_router"

# LiteLLM's own defaults, which say nothing the caller chose: not forwarded.
_DEFAULT_TIMEOUTS = (600.0, 6000.0)
# Retries are the framework's (outside) or the router's (`retry=`): LiteLLM's are off.
_DROPPED = frozenset({"max_retries", "num_retries", "stream", "stream_options"})


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
    ignores the rest (hence the `override` ignores: the parameters are the same by name)."""

    def __init__(self, router: Router) -> None:
        super().__init__()
        self.router = router

    @staticmethod
    def _kwargs(optional_params: Mapping[str, Any], timeout: Any) -> dict[str, Any]:
        kwargs = {k: v for k, v in optional_params.items() if k not in _DROPPED}
        if isinstance(timeout, int | float) and float(timeout) not in _DEFAULT_TIMEOUTS:
            kwargs.setdefault("timeout", timeout)
        return kwargs

    def completion(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            return self.router.completion(
                model=model, messages=messages, **self._kwargs(optional_params, timeout)
            )

    async def acompletion(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            return await self.router.acompletion(
                model=model, messages=messages, **self._kwargs(optional_params, timeout)
            )

    def streaming(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, **__: Any,
    ) -> Iterator[Any]:
        with _as_litellm(model):
            stream = self.router.completion(
                model=model, messages=messages, stream=True, **self._kwargs(optional_params, timeout)
            )
        with stream:
            yield from stream

    async def astreaming(  # type: ignore[override]
        self, model: str, messages: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, **__: Any,
    ) -> AsyncIterator[Any]:
        with _as_litellm(model):
            stream = await self.router.acompletion(
                model=model, messages=messages, stream=True, **self._kwargs(optional_params, timeout)
            )
        async with stream:
            async for chunk in stream:
                yield chunk

    def embedding(  # type: ignore[override]
        self, model: str, input: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            return self.router.embedding(
                model=model, input=input, **self._kwargs(optional_params, timeout)
            )

    async def aembedding(  # type: ignore[override]
        self, model: str, input: list[Any], *_: Any, optional_params: dict[str, Any],
        timeout: Any = None, **__: Any,
    ) -> Any:
        with _as_litellm(model):
            return await self.router.aembedding(
                model=model, input=input, **self._kwargs(optional_params, timeout)
            )


def register(router: Router, provider: str = PROVIDER) -> RouterProvider:
    """Route `litellm.completion(model="<provider>/<group>")` through `router`.

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
    handler = RouterProvider(router)
    kept = [e for e in litellm.custom_provider_map if e.get("provider") != provider]
    litellm.custom_provider_map = [*kept, {"provider": provider, "custom_handler": handler}]
    return handler


def unregister(provider: str = PROVIDER) -> bool:
    """Stop routing `<provider>/...` through a router; False when none was registered.
    Other custom providers are kept."""
    before = len(litellm.custom_provider_map)
    litellm.custom_provider_map = [
        e for e in litellm.custom_provider_map if e.get("provider") != provider
    ]
    if provider in litellm._custom_providers:
        litellm._custom_providers.remove(provider)
    if provider in litellm.provider_list:
        litellm.provider_list.remove(provider)
    return len(litellm.custom_provider_map) < before
