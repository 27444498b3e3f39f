"""An attempt counts only when a request left the process; a route is vendor unless shown local.

Each test reproduces a case from the round's report against FakeProvider, LiteLLM's real
HTTP path: what the provider received is compared with what the journey counts.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policy_router import Breaker, Budget, ConfigError, Reach, Route, Router
from policy_router.testing import FakeProvider

from .conftest import MESSAGES, fake_route


def _two(fake: FakeProvider, **kw: object) -> Router:
    return Router(
        [fake_route(fake, "a", group="g"), fake_route(fake, "b", group="g")],
        breaker=Breaker(failures=1, cooldown=60),
        **kw,  # type: ignore[arg-type]
    )


def test_a_request_litellm_cannot_build_is_not_sent_and_rests_no_route(fake: FakeProvider) -> None:
    """`response_format="json"` fails inside LiteLLM before sending: nothing was received,
    no attempt is counted, no route rests, and the error says the request was not sent."""
    router = _two(fake)
    with pytest.raises(ConfigError, match="not sent") as caught:
        router.completion(model="g", messages=MESSAGES, response_format="json")
    assert fake.requests() == 0
    assert caught.value.journey.attempts == ()
    assert "not sent to openai/a" in str(caught.value.journey)
    assert router.resting() == {}
    assert router.completion(model="g", messages=MESSAGES).choices[0].message.content


def test_a_route_whose_sdk_is_missing_moves_on_without_resting(fake: FakeProvider) -> None:
    """A Vertex route without the Google SDK cannot be sent: the next route answers, and
    the Vertex route is neither rested nor counted as an attempt."""
    vertex = Route("vertex_ai/gemini-2.5-flash", group="g", vertex_project="p", vertex_location="l")
    router = Router([vertex, fake_route(fake, "b")], breaker=Breaker(failures=1, cooldown=60))
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b"
    assert len(routed.journey.attempts) == fake.requests() == 1
    (skip,) = routed.journey.skips
    assert skip.route == "vertex_ai/gemini-2.5-flash" and "ImportError" in skip.reason
    assert router.resting() == {}


def test_an_answer_litellm_makes_itself_costs_nothing_and_counts_no_request(
    fake: FakeProvider,
) -> None:
    """`mock_response` is answered by LiteLLM: no request reaches a provider, the budget
    spends nothing, and the journey counts no request."""
    from policy_router import PriceTable

    table = PriceTable.from_dict(
        {"currency": "USD", "as_of": "2026-12-01", "source": "test", "models": {"openai/a": {"input": "1000", "output": "1000"}}}
    )
    router = Router([fake_route(fake, "a", prices=table)], budget=Budget("1.00"))
    routed = router.route(model="g", messages=MESSAGES, mock_response="hi", max_tokens=10)
    assert routed.response.choices[0].message.content == "hi"
    assert fake.requests() == 0 and routed.journey.attempts == ()
    assert router.spending().spent.amount == Decimal(0)
    assert "nothing was sent" in str(routed.journey)


async def test_an_async_request_litellm_cannot_build_is_not_sent(fake: FakeProvider) -> None:
    """The async path reads the same evidence: nothing received, nothing rested."""
    router = _two(fake)
    with pytest.raises(ConfigError, match="not sent"):
        await router.acompletion(model="g", messages=MESSAGES, response_format="json")
    assert fake.requests() == 0 and router.resting() == {}


def test_provider_failures_still_count_and_rest(fake: FakeProvider) -> None:
    """The evidence works the other way too: a 503 the provider sent is an attempt that
    rests its route, for chat and embeddings alike."""
    from policy_router.testing import Fail

    fake.script("a", Fail(503))
    router = _two(fake)
    routed = router.route(model="g", messages=MESSAGES)
    assert len(routed.journey.attempts) == fake.requests() == 2
    assert "openai/a" in router.resting()
    fake.script("ea", Fail(503))
    embed = Router(
        [
            fake_route(fake, "ea", group="e", capabilities={"embedding": True}),
            fake_route(fake, "eb", group="e", capabilities={"embedding": True}),
        ],
        breaker=Breaker(failures=1, cooldown=60),
    )
    out = embed.route(model="e", input=["x"], endpoint="embedding")
    assert len(out.journey.attempts) == 2 and "openai/ea" in embed.resting()


@pytest.mark.parametrize(
    ("route", "why"),
    [
        (Route("litellm_proxy/team-model", api_base="http://127.0.0.1:4000"), "proxy"),
        (
            Route("azure/my-deployment", api_base="http://127.0.0.1:8080", model_info={"base_model": "azure/gpt-4o"}),
            "proxy",
        ),
        (Route("openrouter/anything", api_base="http://localhost:9000"), "proxy"),
        (Route("somefuture/model-x", api_base="http://127.0.0.1:9000"), "proxy"),
        (Route("openai/my-llama", api_base="http://127.0.0.1:8080/v1", base_model="gpt-4o"), "lists"),
    ],
    ids=lambda v: v.model if isinstance(v, Route) else str(v),
)
def test_a_forwarder_or_a_provider_nobody_listed_is_a_vendor_wherever_it_listens(
    route: Route, why: str
) -> None:
    """Only an allow-list makes a route on-device: forwarders, vendor-only providers,
    unknown prefixes and models LiteLLM knows under a base_model are vendors on loopback."""
    assert route.reach is Reach.VENDOR
    assert why in route.reach_reason


def test_the_floor_never_sends_to_a_loopback_forwarder(fake: FakeProvider) -> None:
    """A litellm_proxy route on loopback is not used under `on_device=True`."""
    proxy = Route("litellm_proxy/team", group="g", api_base=fake.base_url, api_key="k")
    router = Router([proxy])
    with pytest.raises(Exception, match="on-device"):
        router.completion(model="g", messages=MESSAGES, on_device=True)
    assert fake.requests() == 0


# -- the generated space: requests received == attempts, no rest without a request ------------
odd_values = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=20),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.just(object()),
)
litellm_keys = st.sampled_from(
    sorted(__import__("litellm.types.utils", fromlist=["all_litellm_params"]).all_litellm_params)
)
call_keys = st.one_of(
    litellm_keys,
    st.sampled_from(["response_format", "tools", "tool_choice", "seed", "logit_bias", "stop", "user", "top_p"]),
    st.from_regex(r"\Ax_[a-z]{1,8}\Z", fullmatch=True),
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same space every run: a new find is a new test, not a flake
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.dictionaries(call_keys, odd_values, max_size=3), st.sampled_from(["sync", "async"]))
@example({"azure": True}, "sync")  # found by a CI run: LiteLLM's Azure path, a 404 here
@example({"response_format": "json"}, "async")
def test_what_the_provider_received_is_what_the_journey_counts(
    fake: FakeProvider, extra: dict[str, Any], kind: str
) -> None:
    """Any call, with any keyword LiteLLM knows (and unknown ones) holding any value: the
    provider received exactly the journey's attempts, and a route rests only after a
    request it received."""
    fake.reset()
    router = _two(fake)
    try:
        if kind == "sync":
            routed = router.route(model="g", messages=MESSAGES, **extra)
        else:
            routed = asyncio.run(router.aroute(model="g", messages=MESSAGES, **extra))
        journey = routed.journey
    except Exception as error:
        journey = getattr(error, "journey", None)
    attempts = len(journey.attempts) if journey is not None else 0
    assert fake.requests() == attempts, (extra, journey)
    # A route rests only after an attempt the journey counts, and those are what arrived.
    tried = {a.route for a in journey.attempts} if journey is not None else set()
    for name in router.resting():
        assert name in tried, (name, extra)
