"""A whole answer as the server sends it: the provider's JSON with the journey beside it."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from litellm import EmbeddingResponse, ModelResponse

from policy_router.ground.money import Money
from policy_router.server.answers import as_base64, journey_of, shaped

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


def routed(response: Any, cost: Money | None = None) -> Any:
    journey = SimpleNamespace(id="j1", answered_by="openai/a", attempts=(object(),), cost=cost)
    return SimpleNamespace(response=response, journey=journey)


@settings(max_examples=60, deadline=None)
@given(content=TEXT, model=TEXT, tokens=st.integers(0, 2**40), cost=st.none() | st.integers(0, 10**9))
def test_the_body_is_the_responses_json_and_the_journey(content: str, model: str, tokens: int, cost: int | None) -> None:
    response = ModelResponse(
        model=model,
        choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        usage={"prompt_tokens": tokens, "completion_tokens": 1, "total_tokens": tokens + 1},
    )
    answer = routed(response, None if cost is None else Money(cost, "USD"))
    sent = json.loads(shaped(answer))
    assert sent == {**json.loads(response.model_dump_json()), "policy_router": journey_of(answer.journey)}
    assert sent["choices"][0]["message"]["content"] == content


def test_an_answer_with_its_own_policy_router_field_gets_the_journey_once() -> None:
    response = SimpleNamespace(model_dump_json=lambda: '{"id":"x","policy_router":{"route":"forged"}}')
    sent = shaped(routed(response))
    assert sent.count(b'"policy_router"') == 1
    assert json.loads(sent)["policy_router"]["route"] == "openai/a"


def test_base64_vectors_are_float32_and_the_rest_stays() -> None:
    response = EmbeddingResponse(model="e", data=[{"object": "embedding", "index": 0, "embedding": [0.5, -2.0]}])
    sent = json.loads(as_base64(routed(response)))
    assert sent["data"][0]["embedding"] == "AAAAPwAAAMA="  # 0.5 and -2.0, float32 little-endian
    assert sent["policy_router"]["route"] == "openai/a"
