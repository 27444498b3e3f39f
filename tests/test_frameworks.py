"""Frameworks that call `litellm.completion` themselves run on the router through the
LiteLLM provider, unchanged but for their model string."""

from __future__ import annotations

from collections.abc import Iterator

import dspy
import pytest
import smolagents

from policy_router import Router
from policy_router.integrations.litellm import register, unregister
from policy_router.testing import Fail, FakeProvider, Reply

from .conftest import fake_route

DSPY_ANSWER = Reply("[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]")


@pytest.fixture
def smart(fake: FakeProvider) -> Iterator[Router]:
    router = Router([fake_route(fake, "a", group="smart"), fake_route(fake, "b", group="smart")])
    register(router)
    yield router
    unregister()


def test_dspy_predicts_through_the_router(smart: Router, fake: FakeProvider) -> None:
    """`dspy.LM("policy_router/smart")`: a failing route is skipped, DSPy gets its answer."""
    fake.script("a", Fail(503))
    fake.script("b", DSPY_ANSWER)
    lm = dspy.LM("policy_router/smart", cache=False, num_retries=0)
    with dspy.context(lm=lm):
        answer = dspy.Predict("question -> answer")(question="Capital of France?").answer
    assert answer == "Paris" and fake.requests() == 2


def test_smolagents_model_calls_through_the_router(smart: Router, fake: FakeProvider) -> None:
    """smolagents' `LiteLLMModel` (which always passes api_key/api_base, unset) is routed."""
    fake.script("a", Reply("Hello from the router."))
    model = smolagents.LiteLLMModel(model_id="policy_router/smart")
    out = model([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert out.content == "Hello from the router." and fake.requests() == 1
