"""Anthropic's Messages API: `policy-router serve` with the official anthropic SDK as its
client (the way Claude Code and every tool that sets `ANTHROPIC_BASE_URL` reach it), and
`router.aanthropic_messages` in process. Whole and streamed answers in Anthropic's shape,
tools, system prompts, count_tokens, Anthropic's errors; and the router's promises behind
them: the on-device floor, the key's budget, failover with the journey in the headers, the
SDK's retries adding nothing once a provider was asked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import anthropic
import httpx
import pytest

from policy_router import Budget, PriceTable, Route, Router
from policy_router.testing import Fail, FakeProvider, Reply

from .conftest import fake_route
from .test_server import LOCAL_ONLY, SOLO, TEAM, policy, served

SAID = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def server(_fake_server: FakeProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Each end user's day is capped: a call of this module's size has a worst case of
    # $0.061 (a bound of 41 prompt tokens and 20 to write, at $0.001 a token) and costs
    # $0.006, so $0.064 takes one call, not two. Calls without a user are not under it.
    data = policy(_fake_server, breaker=False, budgets=[{"cap": "0.064", "period": "day", "per": "user"}])
    with served(tmp_path_factory.mktemp("messages"), data) as (base, _):
        yield base[: -len("/v1")]  # the Anthropic SDK's base URL has no /v1


def sdk(root: str, key: str = TEAM, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=root, api_key=key, max_retries=retries)


def spent(root: str, key: str) -> Decimal:
    health = httpx.get(f"{root}/health", headers={"Authorization": f"Bearer {key}"}, timeout=10).json()
    return Decimal(health["key"]["spent"])


def test_the_anthropic_sdk_gets_a_whole_answer_in_anthropics_shape(fake: FakeProvider, server: str) -> None:
    """`messages.create` with the SDK's own `x-api-key` and `anthropic-version` headers: a
    Message with text content, a stop reason and usage; the journey in the headers; the
    system prompt reaches the provider; the key is charged."""
    before = spent(server, TEAM)
    raw = sdk(server).messages.with_raw_response.create(
        model="smart", max_tokens=100, system="Answer briefly.", messages=SAID,  # type: ignore[arg-type]
    )
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "text" and message.content[0].text == "Hello from FakeProvider."
    assert message.stop_reason == "end_turn"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert raw.headers["x-policy-router-route"] == "openai/cloud"
    assert raw.headers["x-policy-router-attempts"] == "1"
    assert "Answer briefly." in str(fake.bodies("cloud")[-1])
    assert spent(server, TEAM) > before


def test_a_stream_comes_as_anthropics_events_and_is_charged(fake: FakeProvider, server: str) -> None:
    before = spent(server, TEAM)
    with sdk(server).messages.stream(model="smart", max_tokens=100, messages=SAID) as stream:  # type: ignore[arg-type]
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Hello from FakeProvider."
    assert final.stop_reason == "end_turn" and final.usage.output_tokens > 0
    assert fake.requests("cloud") == 1
    assert spent(server, TEAM) > before


def test_tools_reach_only_a_route_that_has_them_and_come_back_as_tool_use(fake: FakeProvider, server: str) -> None:
    fake.script("cloud", Reply(tool_calls=[{"name": "weather", "arguments": {"city": "Oslo"}}]))
    tool = {"name": "weather", "description": "The weather in a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    message = sdk(server, SOLO).messages.create(
        model="smart", max_tokens=100, messages=SAID, tools=[tool],  # type: ignore[list-item,arg-type]
    )
    used = [b for b in message.content if b.type == "tool_use"]
    assert used and used[0].name == "weather" and used[0].input == {"city": "Oslo"}
    assert message.stop_reason == "tool_use"
    assert "weather" in str(fake.bodies("cloud")[-1])


def test_an_on_device_key_is_answered_only_on_the_device(fake: FakeProvider, server: str) -> None:
    raw = sdk(server, LOCAL_ONLY).messages.with_raw_response.create(model="smart", max_tokens=50, messages=SAID)  # type: ignore[arg-type]
    assert raw.headers["x-policy-router-route"] == "openai/local"
    assert fake.requests("cloud") == 0 and fake.requests("local") == 1


def test_failover_is_the_routers_and_the_sdks_retries_add_nothing(fake: FakeProvider, server: str) -> None:
    """The first route fails, the next answers; when every route fails, Anthropic's error
    with `x-should-retry: false`: the SDK with its default retries sends one round."""
    fake.script("cloud", Fail(500))
    raw = sdk(server).messages.with_raw_response.create(model="smart", max_tokens=50, messages=SAID)  # type: ignore[arg-type]
    assert raw.headers["x-policy-router-route"] == "openai/local"
    assert raw.headers["x-policy-router-attempts"] == "2"
    fake.reset()
    fake.script("cloud", Fail(500))
    fake.script("local", Fail(503))
    with pytest.raises(anthropic.APIStatusError) as raised:
        sdk(server, retries=2).messages.create(model="smart", max_tokens=50, messages=SAID)  # type: ignore[arg-type]
    assert raised.value.status_code == 502
    assert raised.value.response.headers["x-should-retry"] == "false"
    body: Any = raised.value.body
    assert body["type"] == "error" and body["error"]["type"] == "api_error"
    assert fake.requests("cloud") == 1 and fake.requests("local") == 1


def test_errors_take_anthropics_shape_and_status(fake: FakeProvider, server: str) -> None:
    with pytest.raises(anthropic.NotFoundError) as unknown:
        sdk(server).messages.create(model="no-such-group", max_tokens=50, messages=SAID)  # type: ignore[arg-type]
    assert unknown.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.AuthenticationError) as bad_key:
        sdk(server, key="sk-nobody").messages.create(model="smart", max_tokens=50, messages=SAID)  # type: ignore[arg-type]
    assert bad_key.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    no_cap = httpx.post(f"{server}/v1/messages", headers={"x-api-key": TEAM}, json={"model": "smart", "messages": SAID}, timeout=10)
    assert no_cap.status_code == 400
    assert no_cap.json()["error"]["type"] == "invalid_request_error" and "max_tokens" in no_cap.json()["error"]["message"]
    wrong = httpx.post(
        f"{server}/v1/messages", headers={"x-api-key": TEAM},
        json={"model": "smart", "max_tokens": 5, "messages": SAID, "temperature": "hot"}, timeout=10,
    )
    assert wrong.status_code == 400 and "temperature" in wrong.json()["error"]["message"]
    assert fake.requests() == 0


def test_count_tokens_counts_without_asking_a_provider(fake: FakeProvider, server: str) -> None:
    client = sdk(server, SOLO)
    short = client.messages.count_tokens(model="smart", messages=SAID)  # type: ignore[arg-type]
    longer = client.messages.count_tokens(
        model="smart", system="You are a careful assistant who answers in full sentences.", messages=SAID,  # type: ignore[arg-type]
    )
    assert 0 < short.input_tokens < longer.input_tokens
    assert fake.requests() == 0


def test_a_users_budget_holds_on_the_messages_path(fake: FakeProvider, server: str) -> None:
    """`metadata.user_id` (the Messages API's end user) is the call's user for `per="user"`
    budgets: the second call of a user whose day's cap is spent is refused, another user's
    is not; nothing is sent for the refused one."""
    client = sdk(server, SOLO)
    client.messages.create(model="smart", max_tokens=20, messages=SAID, metadata={"user_id": "u-1"})  # type: ignore[arg-type]
    asked = fake.requests()
    with pytest.raises(anthropic.RateLimitError) as refused:
        client.messages.create(model="smart", max_tokens=20, messages=SAID, metadata={"user_id": "u-1"})  # type: ignore[arg-type]
    assert "user:u-1" in refused.value.body["error"]["message"]  # type: ignore[index]
    assert fake.requests() == asked
    client.messages.create(model="smart", max_tokens=20, messages=SAID, metadata={"user_id": "u-2"})  # type: ignore[arg-type]


def test_in_process_aanthropic_messages_whole_and_streamed(fake: FakeProvider) -> None:
    """Over an `openai/` route (LiteLLM's Responses bridge) and a `hosted_vllm/` one (its
    chat bridge): Anthropic's dict, and its events as bytes; both charged and settled."""
    table = PriceTable.from_dict({"currency": "USD", "as_of": "2026-11-01", "source": "test", "models": {
        m: {"input": "1000", "output": "1000"} for m in ("openai/cloud", "hosted_vllm/local")}})
    router = Router(
        [fake_route(fake, "cloud", prices=table, group="cloud"),
         Route("hosted_vllm/local", api_base=fake.base_url, api_key="k", group="local", prices=table,
               capabilities={"streaming": True})],
        budget=Budget("1.00"),
    )

    async def both() -> tuple[Any, str]:
        whole = await router.aanthropic_messages(model="cloud", max_tokens=30, messages=SAID)
        stream = await router.anthropic_messages(model="local", max_tokens=30, messages=SAID, stream=True)
        chunks = [c async for c in stream]
        return whole, b"".join(chunks).decode()

    whole, streamed = asyncio.run(both())
    assert whole["content"][0]["text"] == "Hello from FakeProvider."
    assert "message_stop" in streamed and "Hello" in streamed
    assert router.spending().calls == 2 and router.spending().in_flight == 0


@pytest.mark.parametrize(
    ("extra", "need"),
    [
        ({"messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "What is this?"}]}]}, "images"),
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 2048}, "thinking"),
    ],
)
def test_images_and_thinking_go_only_to_routes_that_have_them(
    fake: FakeProvider, server: str, extra: dict[str, Any], need: str
) -> None:
    """The test's routes declare tools and streaming only: a request with an image or
    with thinking is the caller's error (400), naming what no route has; nothing is sent."""
    with pytest.raises(anthropic.BadRequestError) as refused:
        sdk(server, SOLO).messages.create(**{"model": "smart", "max_tokens": 50, "messages": SAID, **extra})
    assert need in refused.value.body["error"]["message"]  # type: ignore[index]
    assert fake.requests() == 0
