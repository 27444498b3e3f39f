"""The router as a LiteLLM provider: `litellm.completion(model="policy_router/<group>")`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger

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


class CostTally(CustomLogger):
    """A LiteLLM callback as a team tracking spend writes one: it adds up `response_cost`
    over success events and counts failure events."""

    def __init__(self) -> None:
        super().__init__()
        self.costs: list[float | None] = []
        self.failures = 0

    def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.costs.append(kwargs.get("response_cost"))

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.costs.append(kwargs.get("response_cost"))

    def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self.failures += 1

    async def async_log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.failures += 1


# One tally for the module: LiteLLM copies `litellm.callbacks` into lists of its own the
# first time it sees them, and keeps calling what it copied.
TALLY = CostTally()


def _read_all(mode: str) -> None:
    """One call through the provider in `mode`, read to the end."""
    if mode == "sync":
        litellm.completion(model="policy_router/g", messages=MESSAGES)
    elif mode == "stream":
        for _ in litellm.completion(model="policy_router/g", messages=MESSAGES, stream=True):
            pass
    elif mode == "async":

        async def call() -> None:
            await litellm.acompletion(model="policy_router/g", messages=MESSAGES)
            await asyncio.sleep(0.2)  # a service's loop runs on: LiteLLM logs on it

        asyncio.run(call())
    else:

        async def read() -> None:
            stream = await litellm.acompletion(model="policy_router/g", messages=MESSAGES, stream=True)
            async for _ in stream:
                pass

        asyncio.run(read())


@pytest.mark.parametrize("mode", ["sync", "async", "stream", "astream"])
def test_callbacks_see_each_call_once_at_what_the_router_spent(fake: FakeProvider, mode: str) -> None:
    """A success callback summing `response_cost` over calls that fall through (the first
    route 503s) counts what the router spent: one event per call, no failure event."""
    table = PriceTable.from_dict({
        "currency": "USD", "as_of": "2026-12-01", "source": "test",
        "models": {f"openai/{m}": {"input": "1000", "output": "1000"} for m in "ab"},
    })
    router = Router([fake_route(fake, m, prices=table) for m in "ab"], budget=Budget("10.00"))
    tally = TALLY
    lists = ("callbacks", "success_callback", "failure_callback", "_async_success_callback",
             "_async_failure_callback", "input_callback")
    before = {name: list(getattr(litellm, name)) for name in lists}
    litellm.callbacks = [tally]
    register(router)
    _read_all(mode)  # LiteLLM takes `litellm.callbacks` into its own lists on a first call
    time.sleep(0.3)
    router.reconfigure(budget=Budget("10.00", name="fresh"))
    tally.costs, tally.failures = [], 0
    try:
        for _ in range(3):
            fake.script("a", Fail(503))
            fake.script("b", Reply("hello there", usage=(7, 5)))
            _read_all(mode)
        deadline = time.monotonic() + 10  # LiteLLM logs on worker threads after returning
        while len(tally.costs) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # and nothing more arrives
    finally:
        # LiteLLM copied the callback into lists of its own: every later call of the suite
        # would log to it (and pay for the logging) if it stayed there.
        for name, value in before.items():
            setattr(litellm, name, value)
        unregister()
    spent = router.spending().spent.micros / 1_000_000
    assert len(tally.costs) == 3 and tally.failures == 0, (tally.costs, tally.failures)
    assert sum(c or 0.0 for c in tally.costs) == pytest.approx(spent, abs=1e-9)
    assert spent == pytest.approx(3 * 12 * 1000 / 1e6)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_streamed_refusal_raises_at_call_time_in_its_own_class(fake: FakeProvider, mode: str) -> None:
    """Every route at its `rpm`: `stream=True` raises `litellm.RateLimitError` with
    `retry_after` and the journey from the call itself, as the same call unstreamed does,
    not a 503 `MidStreamFallbackError` at the first iteration."""
    router = Router([fake_route(fake, m, rpm=1) for m in "ab"])
    register(router)
    try:
        for _ in range(2):
            litellm.completion(model="policy_router/g", messages=MESSAGES)
        with pytest.raises(litellm.RateLimitError) as raised:
            if mode == "sync":
                litellm.completion(model="policy_router/g", messages=MESSAGES, stream=True)
            else:
                asyncio.run(litellm.acompletion(model="policy_router/g", messages=MESSAGES, stream=True))
    finally:
        unregister()
    assert not isinstance(raised.value, litellm.exceptions.MidStreamFallbackError)
    assert raised.value.retry_after > 0  # type: ignore[attr-defined]
    assert {s.check for s in raised.value.journey.skips} == {"rate_limit"}  # type: ignore[attr-defined]
    assert fake.requests() == 2


def test_a_provider_s_own_429_on_a_stream_stays_a_rate_limit(fake: FakeProvider) -> None:
    fake.script("a", Fail(429, "slow down", retry_after=1))
    register(Router([fake_route(fake, "a")], breaker=None))
    try:
        with pytest.raises(litellm.RateLimitError) as raised:
            litellm.completion(model="policy_router/g", messages=MESSAGES, stream=True)
    finally:
        unregister()
    assert not isinstance(raised.value, litellm.exceptions.MidStreamFallbackError)


def test_litellm_knows_what_a_group_can_do_and_keeps_up(fake: FakeProvider) -> None:
    """`register` tells LiteLLM each group's capabilities (what at least one route can do),
    window and estimated price; `reconfigure` updates it; `unregister` takes it away."""
    table = PriceTable.from_dict({
        "currency": "USD", "as_of": "2026-12-01", "source": "test",
        "models": {"openai/a": {"input": "2", "output": "4"}, "openai/b": {"input": "1", "output": "3"}},
    })
    router = Router([
        fake_route(fake, "a", capabilities={"chat": True, "tools": True}, context_window=8_000, prices=table),
        fake_route(fake, "b", capabilities={"chat": True, "images": True}, context_window=32_000, prices=table),
        fake_route(fake, "c", group="plain", capabilities={"chat": True}),
    ])
    register(router)
    try:
        assert litellm.supports_function_calling("policy_router/g")
        assert litellm.supports_vision("policy_router/g")
        assert not litellm.supports_function_calling("policy_router/plain")
        info = litellm.get_model_info("policy_router/g")
        assert info["max_input_tokens"] == 32_000
        assert info["input_cost_per_token"] == pytest.approx(1e-6)  # the cheapest route's
        router.reconfigure(routes=[
            fake_route(fake, "c", group="plain", capabilities={"chat": True}),
            fake_route(fake, "d", group="new"),
        ])
        assert not litellm.supports_function_calling("policy_router/g")
        assert "policy_router/g" not in litellm.model_cost and "policy_router/new" in litellm.model_cost
    finally:
        unregister()
    assert not any(k.startswith("policy_router/") for k in litellm.model_cost)
    router.reconfigure(routes=[fake_route(fake, "a", capabilities={"chat": True, "tools": True})])
    assert "policy_router/g" not in litellm.model_cost  # no longer followed


@pytest.mark.parametrize("stream", [False, True])
def test_litellms_user_reaches_the_routers_per_user_budget(fake: FakeProvider, stream: bool) -> None:
    """LiteLLM drops `user` from a custom provider's parameters (it maps them as an
    OpenAI-like provider's); the provider reads it back, so a `per="user"` budget counts
    the call of `litellm.completion(model="policy_router/g", user=...)`."""
    table = PriceTable.from_dict({"currency": "USD", "as_of": "2026-11-01", "source": "test",
                                  "models": {"openai/a": {"input": "1000", "output": "1000"}}})
    router = Router([fake_route(fake, "a", prices=table)], budgets=[Budget("1.00", period="day", per="user")])
    register(router)
    try:
        answer = litellm.completion(model="policy_router/g", messages=MESSAGES, user="u-7", stream=stream)
        if stream:
            list(answer)
        assert router.spending(user="u-7").calls == 1
        assert router.spending(user="u-8").calls == 0
    finally:
        unregister()
        router.close()


async def test_reasoning_effort_reaches_a_thinking_route_when_litellm_is_told_to_allow_it(
    fake: FakeProvider,
) -> None:
    """LiteLLM refuses `reasoning_effort` for a custom provider before the provider sees it
    (nothing is sent); with LiteLLM's own `allowed_openai_params` it reaches the router,
    which gives the request to the group's route that reasons, sync and async."""
    router = Router([
        fake_route(fake, "plain", capabilities={"tools": True}),
        fake_route(fake, "think", capabilities={"thinking": True}),
    ])
    register(router)
    try:
        with pytest.raises(litellm.UnsupportedParamsError, match="reasoning_effort"):
            litellm.completion(model="policy_router/g", messages=MESSAGES, reasoning_effort="low")
        assert fake.requests() == 0
        allowed = {"reasoning_effort": "low", "allowed_openai_params": ["reasoning_effort"]}
        answer = litellm.completion(model="policy_router/g", messages=MESSAGES, **allowed)
        later = await litellm.acompletion(model="policy_router/g", messages=MESSAGES, **allowed)
        assert answer._hidden_params["policy_router"].answered_by == "openai/think"
        assert later._hidden_params["policy_router"].answered_by == "openai/think"
        assert [b["reasoning_effort"] for b in fake.bodies("think")] == ["low", "low"]
        assert fake.requests("plain") == 0
    finally:
        unregister()
        router.close()
