"""The router as a LiteLLM provider: `litellm.completion(model="policy_router/<group>")`."""

from __future__ import annotations

from collections.abc import Iterator

import litellm
import pytest

from policy_router import Budget, NoRouteError, OverBudgetError, PriceTable, Router
from policy_router.integrations.litellm import RefusedBeforeSending, register, unregister
from policy_router.testing import Fail, FakeProvider, Reply

from .conftest import MESSAGES, fake_route

TOOL = {
    "type": "function",
    "function": {"name": "weather", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture
def routed(fake: FakeProvider) -> Iterator[Router]:
    router = Router(
        [
            fake_route(fake, "a", reach="vendor"),
            fake_route(fake, "b", reach="vendor"),
            fake_route(fake, "local", reach="on_device"),
            fake_route(fake, "e", group="embed", capabilities={"embedding": True}),
        ]
    )
    register(router)
    yield router
    unregister()


def test_completion_through_the_provider_is_routed(routed: Router, fake: FakeProvider) -> None:
    """A plain `litellm.completion` call falls through a failing route and carries the
    journey; the policy keywords pass as extra kwargs."""
    fake.script("a", Fail(503))
    response = litellm.completion(model="policy_router/g", messages=MESSAGES)
    journey = response._hidden_params["policy_router"]
    assert journey.answered_by == "openai/b" and len(journey.attempts) == fake.requests() == 2
    local = litellm.completion(model="policy_router/g", messages=MESSAGES, on_device=True)
    assert local._hidden_params["policy_router"].answered_by == "openai/local"


async def test_async_and_streams_keep_their_chunks(routed: Router, fake: FakeProvider) -> None:
    """acompletion, and streams sync and async, deliver the router's chunks: the text whole
    and the final chunk's finish reason."""
    response = await litellm.acompletion(model="policy_router/g", messages=MESSAGES)
    assert response.choices[0].message.content
    fake.script("a", Reply("one two three"))
    text = "".join(
        c.choices[0].delta.content or ""
        for c in litellm.completion(model="policy_router/g", messages=MESSAGES, stream=True)
    )
    assert text.split() == ["one", "two", "three"]
    fake.script("a", Reply("four five"))
    stream = await litellm.acompletion(model="policy_router/g", messages=MESSAGES, stream=True)
    parts = [c async for c in stream]
    assert "".join(c.choices[0].delta.content or "" for c in parts).split() == ["four", "five"]


def test_a_streamed_tool_call_survives_the_bridge(routed: Router, fake: FakeProvider) -> None:
    """A tool call streamed by the provider reaches the caller's chunks."""
    fake.script("a", Reply("", tool_calls=[{"name": "weather", "arguments": {"city": "Oslo"}}]))
    chunks = list(
        litellm.completion(model="policy_router/g", messages=MESSAGES, tools=[TOOL], stream=True)
    )
    calls = [t for c in chunks for t in (c.choices[0].delta.tool_calls or []) if c.choices]
    assert calls and calls[0].function.name == "weather"


def test_embeddings_through_the_provider(routed: Router, fake: FakeProvider) -> None:
    """`litellm.embedding(model="policy_router/embed")` is routed too."""
    out = litellm.embedding(model="policy_router/embed", input=["a", "b"])
    assert len(out.data) == 2 and fake.requests() == 1


def test_a_refusal_is_a_bad_request_and_an_outer_retry_sends_nothing(fake: FakeProvider) -> None:
    """A request refused before sending (the floor, the budget) is a `BadRequestError`
    with the router's error as its cause and the journey. LiteLLM 1.110.2's own
    `num_retries` retries even a 400 (measured: 4 calls for `num_retries=3`), and each is
    refused again before sending: nothing reaches a provider, nothing is spent."""
    table = PriceTable.from_dict(
        {"currency": "USD", "as_of": "2026-12-01", "source": "t", "models": {"openai/a": {"input": "1000", "output": "1000"}}}
    )
    calls = []
    router = Router([fake_route(fake, "a", prices=table, reach="vendor")], budget=Budget("0.001"))
    handler = register(router)
    original = handler.router.completion

    def counted(**kwargs: object) -> object:
        calls.append(kwargs)
        return original(**kwargs)  # type: ignore[arg-type]

    handler.router = type("R", (), {"completion": staticmethod(counted)})()  # type: ignore[assignment]
    try:
        with pytest.raises(RefusedBeforeSending) as caught:
            litellm.completion(model="policy_router/g", messages=MESSAGES, max_tokens=100, num_retries=3)
        assert isinstance(caught.value, litellm.BadRequestError)
        assert isinstance(caught.value.__cause__, OverBudgetError)
        assert caught.value.journey is not None and fake.requests() == 0
        assert len(calls) == 4  # LiteLLM's loop, not the router's: see the docstring
        assert router.spending().spent.micros == 0
        calls.clear()
        with pytest.raises(RefusedBeforeSending):
            litellm.completion(model="policy_router/g", messages=MESSAGES, max_tokens=100)
        assert len(calls) == 1
        with pytest.raises(RefusedBeforeSending) as floor:
            litellm.completion(model="policy_router/g", messages=MESSAGES, on_device=True)
        assert isinstance(floor.value.__cause__, NoRouteError)
    finally:
        unregister()


def test_register_keeps_other_providers_and_unregister_removes_only_its_own(
    fake: FakeProvider,
) -> None:
    """Registering twice replaces the router under one name; a user's own custom provider
    stays through register and unregister."""
    mine = {"provider": "mine", "custom_handler": litellm.CustomLLM()}
    litellm.custom_provider_map = [mine]
    try:
        first = register(Router([fake_route(fake, "a")]))
        second = register(Router([fake_route(fake, "b")]))
        handlers = [e["custom_handler"] for e in litellm.custom_provider_map]
        assert handlers == [mine["custom_handler"], second] and first not in handlers
        response = litellm.completion(model="policy_router/g", messages=MESSAGES)
        assert response._hidden_params["policy_router"].answered_by == "openai/b"
        assert unregister() is True and unregister() is False
        assert litellm.custom_provider_map == [mine]
    finally:
        litellm.custom_provider_map = []
