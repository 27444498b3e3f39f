"""The LiteLLM-shaped face of a router: `completion`, `embedding`, `responses`,
`text_completion`, their async twins, `route`/`aroute` and `batch_completion`, each taking
LiteLLM's keyword arguments. Every one goes through the one call path a router provides
(`_route`/`_aroute`); this class holds no state and no policy.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from ..core.journey import Routed
from ..ground.clock import Clock
from .batch import Batch, requests_of

__all__ = ["LiteLLMFace"]


class LiteLLMFace:
    """The calls of `Router`, each mirroring the LiteLLM function of its name."""

    @property
    def _clock(self) -> Clock:
        raise NotImplementedError  # the router's clock

    def _route(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Routed[Any]:
        raise NotImplementedError  # the router's one call path

    def _aroute(
        self, endpoint: str, model: str | None, messages: Any, kwargs: dict[str, Any]
    ) -> Awaitable[Routed[Any]]:
        raise NotImplementedError  # the async call path: the call read, its coroutine

    def _open(self) -> None:
        raise NotImplementedError  # raises when the router is closed

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
        batch = self._batch(model, messages, max_concurrency, progress, kwargs)
        return batch.run(lambda call: self._route("chat", model, *_split(call)))

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
        batch = self._batch(model, messages, max_concurrency, progress, kwargs)
        return await batch.arun(lambda call: self._aroute("chat", model, *_split(call)))

    def _batch(
        self,
        model: str | None,
        messages: Any,
        max_concurrency: int,
        progress: bool,
        kwargs: dict[str, Any],
    ) -> Batch:
        self._open()  # a closed router refuses the batch, not each request in it
        concurrency = kwargs.pop("max_workers", max_concurrency)  # LiteLLM's name for it
        deadline = kwargs.pop("deadline", None)
        return Batch(
            requests_of(messages, kwargs),
            max_concurrency=concurrency,
            deadline=deadline,
            clock=self._clock,
            progress=progress,
            label=f"batch → {model}",
        )


def _split(call: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A batch request's messages, and the rest of its kwargs."""
    return call["messages"], {k: v for k, v in call.items() if k != "messages"}
