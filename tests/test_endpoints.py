"""Every endpoint through one driver: embeddings, the Responses API and text completions
get the same floor, requirements, breaker, budget, deadline and journey as chat, sync,
async and streamed, through FakeProvider over LiteLLM's real HTTP path."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import litellm
import pytest

from policy_router import (
    Breaker,
    Budget,
    DeadlineExceededError,
    Money,
    OverBudgetError,
    PriceTable,
    Route,
    Router,
)
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from .conftest import KEY_PREFIX

# endpoint: (the call's prompt keyword arguments, what the route declares, LiteLLM's class)
CASES: dict[str, tuple[dict[str, Any], dict[str, bool], str]] = {
    "chat": (
        {"messages": [{"role": "user", "content": "Say hello."}]},
        {"chat": True, "streaming": True},
        "ModelResponse",
    ),
    "embedding": ({"input": ["first text", "second"]}, {"embedding": True}, "EmbeddingResponse"),
    "responses": (
        {"input": "Say hello."},
        {"responses": True, "streaming": True},
        "ResponsesAPIResponse",
    ),
    "completion": (
        {"prompt": "Once upon"},
        {"completion": True, "streaming": True},
        "TextCompletionResponse",
    ),
}
PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "tests",
        "models": {f"openai/{n}": {"input": "1", "output": "2"} for n in ("a", "b", "vendor")},
    }
)


def routes(fake: FakeProvider, endpoint: str, **kw: Any) -> list[Route]:
    declared = CASES[endpoint][1]
    return [
        Route(
            f"openai/{name}",
            group="g",
            api_base=fake.base_url,
            api_key=f"{KEY_PREFIX}{name}",
            capabilities=declared,
            prices=PRICES,
            reach="vendor" if name == "vendor" else None,
            **kw,
        )
        for name in ("vendor", "a", "b")
    ]


def call(router: Router, endpoint: str, driver: str, **kwargs: Any) -> Any:
    """Route one call the way its caller would: the router's function of that name."""
    prompt = dict(CASES[endpoint][0])
    names = {
        "chat": "completion",
        "embedding": "embedding",
        "responses": "responses",
        "completion": "text_completion",
    }
    name = names[endpoint]
    if driver == "async":
        return asyncio.run(getattr(router, "a" + name)(model="g", **prompt, **kwargs))
    return getattr(router, name)(model="g", **prompt, **kwargs)


def journey_of(response: Any) -> Any:
    return response._hidden_params["policy_router"]


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("endpoint", list(CASES))
def test_each_endpoint_falls_through_under_the_floor_and_returns_litellms_object(
    fake: FakeProvider, endpoint: str, driver: str
) -> None:
    """A 503 on the first on-device route falls through to the next; the vendor route is
    skipped by the floor and never asked; the answer is LiteLLM's own object with the
    journey in its _hidden_params, and requests received equal attempts."""
    fake.script("a", Fail(503))
    router = Router(routes(fake, endpoint), breaker=Breaker(failures=1))
    response = call(router, endpoint, driver, on_device=True)
    assert type(response).__name__ == CASES[endpoint][2]
    journey = journey_of(response)
    assert journey.answered_by == "openai/b"
    assert [s.route for s in journey.skips] == ["openai/vendor"]
    assert fake.requests("vendor") == 0
    assert fake.requests() == len(journey.attempts) == 2
    assert "openai/a" in router.resting()


@pytest.mark.parametrize("endpoint", list(CASES))
def test_a_bad_request_stops_on_every_endpoint(fake: FakeProvider, endpoint: str) -> None:
    """A 400 is about the request: raised as LiteLLM's BadRequestError, no other route asked."""
    fake.script("vendor", Fail(400))
    router = Router(routes(fake, endpoint))
    with pytest.raises(litellm.BadRequestError) as caught:
        call(router, endpoint, "sync")
    assert caught.value.journey.attempts[0].then.startswith("stopped")  # type: ignore[attr-defined]
    assert fake.requests() == 1


@pytest.mark.parametrize("endpoint", list(CASES))
def test_the_budget_holds_on_every_endpoint(fake: FakeProvider, endpoint: str) -> None:
    """A cap too small for the bound is refused before sending; a call that fits is charged
    its usage, and the journey's cost is what the budget counts."""
    caps = {"max_output_tokens": 40} if endpoint == "responses" else {"max_tokens": 40}
    extra = {} if endpoint == "embedding" else caps
    router = Router(routes(fake, endpoint)[1:], budget=Budget("0.000001"))
    with pytest.raises(OverBudgetError):
        call(router, endpoint, "sync", **extra)
    assert fake.requests() == 0
    router = Router(routes(fake, endpoint)[1:], budget=Budget("1.00"))
    response = call(router, endpoint, "sync", **extra)
    spending = router.spending()
    assert spending.calls == 1 and spending.is_exact and spending.reserved == Money(0)
    assert journey_of(response).cost == spending.spent > Money(0)


def test_an_embedding_is_billed_by_its_input_only(fake: FakeProvider) -> None:
    """No reply is generated: the reservation is the input's bound, the charge its tokens."""
    fake.script("a", Reply(usage=(7, 0)))
    router = Router(routes(fake, "embedding")[1:], budget=Budget("1.00"))
    routed = router.route(model="g", endpoint="embedding", input=["a b c"])
    assert routed.cost == Money(7)  # 7 input tokens at 1.00 per million, rounded up
    assert router.spending().overshoot_possible is False


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("endpoint", list(CASES))
def test_the_deadline_holds_on_every_endpoint(
    fake: FakeProvider, endpoint: str, driver: str
) -> None:
    """A silent provider ends the request at the deadline, whatever the endpoint."""
    fake.script("a", Hang(3))
    router = Router(routes(fake, endpoint)[1:], deadline=0.3)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        call(router, endpoint, driver)
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("endpoint", ["responses", "completion"])
def test_streams_fall_through_before_their_first_event(
    fake: FakeProvider, endpoint: str, driver: str
) -> None:
    """A stream whose route fails before its first event moves on; the caller reads the
    next route's events, and the stream is charged when it ends."""
    fake.script("a", Fail(503))
    router = Router(routes(fake, endpoint)[1:], budget=Budget("1.00"))
    caps = {"max_output_tokens": 40} if endpoint == "responses" else {"max_tokens": 40}

    async def read_async() -> tuple[Any, list[Any]]:
        stream = await call_async(router, endpoint, stream=True, **caps)
        return stream, [event async for event in stream]

    if driver == "async":
        stream, events = asyncio.run(read_async())
    else:
        stream = call(router, endpoint, "sync", stream=True, **caps)
        events = list(stream)
    assert events and stream.text == "Hello from FakeProvider."
    assert stream.journey.answered_by == "openai/b" and fake.requests() == 2
    assert router.spending().calls == 1 and router.spending().reserved == Money(0)


async def call_async(router: Router, endpoint: str, **kwargs: Any) -> Any:
    prompt = CASES[endpoint][0]
    if endpoint == "responses":
        return await router.aresponses(model="g", **prompt, **kwargs)
    return await router.atext_completion(model="g", **prompt, **kwargs)


def test_a_chat_request_skips_an_embedding_model_and_the_reverse(fake: FakeProvider) -> None:
    """What a route serves is a requirement: LiteLLM's mode says text-embedding-3-small
    serves embeddings, gpt-4o-mini chat; each request goes to the one that serves it."""
    group = [
        Route("openai/text-embedding-3-small", group="mixed", api_base=fake.base_url, api_key="k1"),
        Route("openai/gpt-4o-mini", group="mixed", api_base=fake.base_url, api_key="k2"),
    ]
    router = Router(group)
    routed = router.route(model="mixed", messages=[{"role": "user", "content": "hi"}])
    assert routed.route.name == "openai/gpt-4o-mini"
    assert [(s.route, s.reason) for s in routed.journey.skips] == [
        ("openai/text-embedding-3-small", "cannot do chat")
    ]
    vectors = router.route(model="mixed", endpoint="embedding", input=["hi"])
    assert vectors.route.name == "openai/text-embedding-3-small"
    assert [(s.route, s.reason) for s in vectors.journey.skips] == [
        ("openai/gpt-4o-mini", "cannot do embedding")
    ]
    assert fake.requests("text-embedding-3-small") == 1 and fake.requests("gpt-4o-mini") == 1
    explanation = router.explain(model="mixed", endpoint="embedding", input=["a"])
    assert [v.route for v in explanation.verdicts if v.would_try] == [
        "openai/text-embedding-3-small"
    ]
    assert "embedding" in str(explanation)


def test_malformed_prompts_are_refused_before_sending(fake: FakeProvider) -> None:
    """Each endpoint checks its own prompt argument, naming it."""
    from policy_router import ConfigError

    router = Router(routes(fake, "embedding")[1:])
    with pytest.raises(ConfigError, match="input must be a string or a non-empty list"):
        router.embedding(model="g", input=[])
    with pytest.raises(ConfigError, match="stream=True is not a thing for embeddings"):
        router.embedding(model="g", input="x", stream=True)
    with pytest.raises(ConfigError, match="messages= belongs to chat"):
        router.route(model="g", messages=[{"role": "user", "content": "x"}], endpoint="embedding")
    with pytest.raises(ConfigError, match="endpoint='images' is not an endpoint"):
        router.route(model="g", endpoint="images", prompt="x")
    assert fake.requests() == 0
