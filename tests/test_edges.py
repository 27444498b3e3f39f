"""The promises at the edges a LiteLLM caller reaches: a request that never left this
process is no provider fault; credentials per provider; a floor that fails closed; the
router's errors are LiteLLM's too."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import litellm
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from policy_router import (
    Breaker,
    ConfigError,
    DeadlineExceededError,
    NoRouteError,
    PolicyRouterError,
    Reach,
    RefusedError,
    Route,
    Router,
)
from policy_router.testing import Drop, Fail, FakeProvider, Hang, Refuse, Reply

from .conftest import CAPS, KEY_PREFIX, MESSAGES, fake_route

# -- a request that never left this process ----------------------------------------------------
# Each malformed call: the keyword arguments that make it, and whether this side refuses it
# before LiteLLM sees it ("refused") or LiteLLM fails it locally ("local").
MALFORMED: dict[str, tuple[dict[str, Any], str]] = {
    "lone surrogate": ({"messages": [{"role": "user", "content": "bad \ud800"}]}, "refused"),
    "surrogate in a part": (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]},
        "refused",
    ),
    "int content": ({"messages": [{"role": "user", "content": 42}]}, "refused"),
    "dict content": ({"messages": [{"role": "user", "content": {"a": 1}}]}, "refused"),
    "timeout -5": ({"timeout": -5}, "refused"),
    "timeout inf": ({"timeout": math.inf}, "refused"),
    "timeout nan": ({"timeout": math.nan}, "refused"),
    "deadline inf": ({"deadline": math.inf}, "refused"),
    "n=0": ({"n": 0}, "refused"),
    "max_completion_tokens=0": ({"max_completion_tokens": 0}, "refused"),
    "stream='yes'": ({"stream": "yes"}, "refused"),
    "unserialisable kwarg": ({"temperature": object()}, "local"),
    "unserialisable tool": ({"tools": [{"type": "function", "function": object()}]}, "local"),
}
FAULTS = {
    "ok": None,
    "503": Fail(503),
    "429": Fail(429, retry_after=30),
    "400": Fail(400),
    "drop": Drop(),
}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from(sorted(MALFORMED))),
            st.sampled_from(sorted(FAULTS)),
            st.booleans(),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_requests_never_sent_count_no_attempt_and_rest_no_route(
    fake: FakeProvider, requests: list[tuple[str | None, str, bool]]
) -> None:
    """Malformed calls mixed with provider faults, sync and async: for every request the
    provider's count equals the journey's attempts, and a route rests only after a provider
    fault that was really sent to it."""
    fake.reset()
    router = Router(
        [fake_route(fake, "a", capabilities={**CAPS, "streaming": True}), fake_route(fake, "b")],
        breaker=Breaker(failures=1, cooldown=600),
    )
    faulted: set[str] = set()
    for malformed, fault, use_async in requests:
        router.reset()
        faulted.clear()
        before = fake.requests()
        kwargs: dict[str, Any] = {"messages": MESSAGES}
        if malformed is not None:
            kwargs.update(MALFORMED[malformed][0])
        step = FAULTS[fault]
        if step is not None:
            fake.script("a", step)
        journey = None
        try:
            if use_async:
                routed = asyncio.run(router.aroute(model="g", **kwargs))
            else:
                routed = router.route(model="g", **kwargs)
            journey = routed.journey
            if kwargs.get("stream"):
                list(routed.response)
        except (PolicyRouterError, litellm.APIError, litellm.BadRequestError) as error:
            journey = getattr(error, "journey", None)
            if malformed is not None:
                assert isinstance(error, ConfigError)
                if MALFORMED[malformed][1] == "local":
                    assert journey is not None and journey.skips[0].check.value == "send"
        sent = fake.requests() - before
        attempts = len(journey.attempts) if journey is not None else 0
        assert sent == attempts
        if malformed is not None:
            assert sent == 0
        for attempt in journey.attempts if journey is not None else ():
            if attempt.outcome in ("server_error", "rate_limited", "connection"):
                faulted.add(attempt.route)
        assert set(router.resting()) <= faulted
    if step is not None and fake.requests() == 0:
        fake.reset()


def test_a_local_error_wrapped_by_litellm_is_not_sent_and_says_why(fake: FakeProvider) -> None:
    """LiteLLM's 500 around a local TypeError is a ConfigError naming it, with the journey:
    nothing sent, no attempt, every route healthy."""
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker(failures=1))
    with pytest.raises(ConfigError, match="not sent: TypeError") as caught:
        router.completion(model="g", messages=MESSAGES, temperature=object())
    journey = caught.value.journey
    assert journey is not None and journey.attempts == ()
    assert [str(s) for s in journey.skips] == [
        "not sent to openai/a (TypeError: Object of type object is not JSON serializable)"
    ]
    assert fake.requests() == 0 and router.resting() == {}


def test_litellms_own_parameter_check_stops_with_its_own_exception(fake: FakeProvider) -> None:
    """UnsupportedParamsError is raised before sending: re-raised as LiteLLM's own class,
    with the journey, no attempt counted and no route rested."""
    router = Router(
        [
            Route(
                "anthropic/claude-sonnet-4-5",
                group="g",
                api_base=fake.base_url,
                api_key=f"{KEY_PREFIX}anthropic",
                reach="on_device",
            ),
            fake_route(fake, "b"),
        ],
        breaker=Breaker(failures=1),
    )
    with pytest.raises(litellm.UnsupportedParamsError) as caught:
        router.completion(model="g", messages=MESSAGES, logit_bias={"1": 1})
    journey = caught.value.journey  # type: ignore[attr-defined]
    assert journey.attempts == () and journey.skips[0].check.value == "send"
    assert fake.requests() == 0 and router.resting() == {}


def test_a_missing_key_moves_on_without_resting_the_route(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A route whose client cannot be built (no key) is not sent to; the next route answers
    and nothing rests, since the provider never heard of the request."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = Route("openai/keyless", group="g", api_base=fake.base_url, capabilities=CAPS)
    router = Router([keyless, fake_route(fake, "b")], breaker=Breaker(failures=1))
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b" and routed.attempts == 1
    [skip] = routed.journey.skips
    assert skip.check.value == "send" and "Missing credentials" in skip.reason
    assert fake.requests() == 1 and router.resting() == {}


def test_httpx_timeout_is_accepted_as_litellm_accepts_it(fake: FakeProvider) -> None:
    """timeout=httpx.Timeout(...) passes; under a deadline each of its parts is capped."""
    router = Router([fake_route(fake, "a")], deadline=2)
    routed = router.route(model="g", messages=MESSAGES, timeout=httpx.Timeout(30.0, connect=1.0))
    assert routed.attempts == 1
    with pytest.raises(ConfigError, match=r"timeout\.read"):
        router.completion(model="g", messages=MESSAGES, timeout=httpx.Timeout(5.0, read=-1))


@pytest.mark.parametrize("timeout", [-5, 0, math.inf, math.nan, "soon"])
def test_a_route_with_a_bad_timeout_is_refused_when_built(timeout: Any) -> None:
    """Route(timeout=...) is checked at construction, naming the route."""
    with pytest.raises(ConfigError, match=r"Route\('openai/x'\)\.timeout"):
        Route("openai/x", timeout=timeout)


def test_the_routes_timeout_is_a_default_the_caller_and_the_deadline_tighten(
    fake: FakeProvider,
) -> None:
    """A route's timeout holds unless the call passes a shorter one or the deadline is
    shorter: a silent provider is given up after the shortest of the three."""
    fake.script("a", Hang(3), Hang(3))
    router = Router([fake_route(fake, "a", timeout=0.3), fake_route(fake, "b")], deadline=20)
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b"
    assert routed.journey.attempts[0].outcome == "timeout"
    assert routed.journey.attempts[0].elapsed < 1.5


# -- credentials per provider ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("route", "state"),
    [
        (
            Route(
                "azure/gpt-4o",
                api_key="k",
                api_base="https://x.openai.azure.com",
                api_version="2024-06-01",
            ),
            "ready",
        ),
        (Route("azure/gpt-4o", api_key="k", api_base="https://x.openai.azure.com"), "denied"),
        (
            Route(
                "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
                aws_access_key_id="AKIA",
                aws_secret_access_key="s",
                aws_region_name="us-east-1",
            ),
            "ready",
        ),
        (
            Route("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", aws_profile_name="dev"),
            "ready",
        ),
        (Route("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0"), "unknown"),
        (
            Route(
                "vertex_ai/gemini-2.5-pro",
                vertex_project="p",
                vertex_location="us-central1",
                vertex_credentials="/secrets/sa.json",
            ),
            "ready",
        ),
        (Route("vertex_ai/gemini-2.5-pro"), "unknown"),
        (Route("gemini/gemini-2.5-flash", api_key="k"), "ready"),
        (Route("gemini/gemini-2.5-flash"), "denied"),
        (Route("anthropic/claude-sonnet-4-5", api_key="k"), "ready"),
        (Route("anthropic/claude-sonnet-4-5"), "denied"),
        (Route("ollama/llama3.1"), "ready"),
    ],
    ids=lambda v: v if isinstance(v, str) else repr(v.model) + str(sorted(v.kwargs)),
)
def test_preflight_counts_the_credentials_a_route_carries(
    route: Route, state: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every name LiteLLM reads for the provider counts; "denied" only when certain;
    "unknown" where the SDK may find credentials elsewhere; nothing rests without a live
    call."""
    for name in (
        "AZURE_API_VERSION",
        "AZURE_API_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_REGION_NAME",
        "VERTEXAI_PROJECT",
        "VERTEXAI_LOCATION",
        "GOOGLE_API_KEY",
        "GEMINI_API_KEY",
        "ANTHROPIC_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    router = Router([route], breaker=Breaker())
    verdict = router.preflight()[route.name]
    assert verdict.state == state, verdict
    assert router.resting() == {}
    problems = router.check()
    assert any("missing credentials" in p for p in problems) == (state == "denied")


# -- the floor fails closed --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("route", "reach", "why"),
    [
        (Route("openai/gpt-4o", api_base="http://localhost:4000"), Reach.VENDOR, "proxy"),
        (Route("anthropic/claude-sonnet-4-5", api_base="http://127.0.0.1:4000"), Reach.VENDOR, "proxy"),
        (Route("openai/my-llama", api_base="http://127.0.0.1:8080/v1"), Reach.ON_DEVICE, "does not list"),
        (Route("hosted_vllm/meta-llama/Llama-3.1-8B", api_base="http://[::1]:8000/v1"), Reach.ON_DEVICE, "serves"),
        (Route("ollama/llama3.1"), Reach.ON_DEVICE, "ollama serves"),
        (Route("ollama/gpt-oss:120b-cloud"), Reach.VENDOR, "cloud model"),
        (Route("lm_studio/qwen", api_base="http://localhost:1234/v1"), Reach.ON_DEVICE, "serves"),
        (Route("openai/my-llama", api_base="http://10.0.0.5:8080/v1"), Reach.VENDOR, "not loopback"),
        (Route("openai/gpt-4o"), Reach.VENDOR, "no api_base"),
        (Route("openai/gpt-4o", api_base="http://localhost:4000", reach="on_device"), Reach.ON_DEVICE, "declared"),
    ],
    ids=lambda v: v.model if isinstance(v, Route) else str(v),
)
def test_an_undeclared_reach_is_inferred_to_fail_closed(route: Route, reach: Reach, why: str) -> None:
    """A hosted vendor model behind a loopback proxy stays vendor; only a local server, or
    a model LiteLLM does not list, on loopback is on-device; the reason says which."""
    assert route.reach is reach
    assert why in route.reach_reason


def test_explain_and_check_say_how_each_reach_was_decided(fake: FakeProvider) -> None:
    """An on_device request skips a loopback proxy to OpenAI, naming why it is a vendor."""
    proxy = Route("openai/gpt-4o", group="g", api_base=fake.base_url, api_key=f"{KEY_PREFIX}p")
    router = Router([proxy, fake_route(fake, "local")])
    routed = router.route(model="g", messages=MESSAGES, on_device=True)
    assert routed.route.name == "openai/local" and fake.requests("gpt-4o") == 0
    [skip] = routed.journey.skips
    assert "LiteLLM lists openai/gpt-4o as a hosted openai model" in skip.reason
    verdicts = {v.route: v.reason for v in router.explain(model="g", messages=MESSAGES).verdicts}
    assert "hosted openai model" in verdicts["openai/gpt-4o"]


# -- drop-in exceptions ------------------------------------------------------------------------
def test_the_deadline_error_is_a_litellm_timeout(fake: FakeProvider) -> None:
    """`except litellm.Timeout:` catches the router's deadline, sync and async."""
    # A model of its own: an abandoned sync call keeps running on its worker and may reach
    # the provider after this test has ended, where it must not take another test's step.
    fake.script("hangs", Hang(2), Hang(2), Hang(2))
    router = Router([fake_route(fake, "hangs")], deadline=0.2)
    with pytest.raises(litellm.Timeout) as caught:
        router.completion(model="g", messages=MESSAGES)
    assert isinstance(caught.value, DeadlineExceededError) and caught.value.journey is not None
    assert caught.value.status_code == 408
    with pytest.raises(litellm.Timeout):
        asyncio.run(router.acompletion(model="g", messages=MESSAGES))
    with pytest.raises(TimeoutError):
        router.completion(model="g", messages=MESSAGES, deadline=0.05)


def test_a_refusal_is_a_litellm_content_policy_violation(fake: FakeProvider) -> None:
    """`except litellm.ContentPolicyViolationError:` catches RefusedError, which keeps the
    provider's error and the journey."""
    fake.script("a", Refuse())
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")])
    with pytest.raises(litellm.ContentPolicyViolationError) as caught:
        router.completion(model="g", messages=MESSAGES)
    error = caught.value
    assert isinstance(error, RefusedError) and isinstance(error, PolicyRouterError)
    assert error.status_code == 400 and error.journey is not None
    assert isinstance(error.provider_error, litellm.BadRequestError)
    assert fake.requests("b") == 0


def test_nothing_sendable_is_still_a_no_route_error(fake: FakeProvider) -> None:
    """The router's own errors keep their tree: NoRouteError is a LookupError."""
    router = Router([fake_route(fake, "a", reach="vendor")])
    with pytest.raises(LookupError):
        router.completion(model="g", messages=MESSAGES, on_device=True)
    with pytest.raises(NoRouteError):
        router.completion(model="g", messages=MESSAGES, on_device=True)
    fake.script("a", Reply("ok"))


# -- validation no stricter than LiteLLM ------------------------------------------------------
def _litellm_prompt_type() -> Any:
    import inspect

    import litellm

    return inspect.signature(litellm.text_completion).parameters["prompt"].annotation


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.from_type(_litellm_prompt_type()).filter(lambda p: p != [] and p != ""),
        st.lists(st.integers(0, 100_000), min_size=1, max_size=6),
        st.lists(st.lists(st.integers(0, 100_000), min_size=1, max_size=4), min_size=1, max_size=4),
    )
)
def test_every_prompt_shape_litellm_accepts_is_accepted(prompt: Any) -> None:
    """Every prompt LiteLLM's own type allows, and OpenAI's token-id forms, pass validation
    (a shape that is surely wrong is what the router refuses, not one it did not list)."""
    from policy_router.endpoints import ENDPOINTS

    def nonempty(value: Any) -> bool:
        if isinstance(value, str | int):
            return True
        return bool(value) and all(map(nonempty, value))

    assume(nonempty(prompt))
    try:
        ENDPOINTS["completion"].check({"prompt": prompt})
    except ConfigError as refused:
        assert "surrogate" in str(refused), prompt


def test_token_ids_and_a_tuple_of_messages_are_sent(fake: FakeProvider) -> None:
    """`prompt=[1, 2, 3]`, `prompt=[[1, 2], [3]]` and `messages=tuple(...)` are sent, as
    LiteLLM sends them."""
    router = Router([fake_route(fake, "a")])
    router.text_completion(model="g", prompt=[1, 2, 3], max_tokens=5)
    router.text_completion(model="g", prompt=[[1, 2], [3]], max_tokens=5)
    router.completion(model="g", messages=tuple(MESSAGES))
    assert fake.requests() == 3


def test_framework_defaults_are_no_conflict(fake: FakeProvider) -> None:
    """`api_key=None, api_base=None, custom_llm_provider=None, num_retries=0` (what
    smolagents and ChatLiteLLM always pass) are accepted and change nothing."""
    router = Router([fake_route(fake, "a")])
    out = router.completion(
        model="g", messages=MESSAGES, api_key=None, api_base=None, custom_llm_provider=None,
        num_retries=0, max_retries=0,
    )
    assert out.choices[0].message.content and fake.requests() == 1
    (body,) = fake.bodies("a")
    assert body["model"] == "a"
    with pytest.raises(ConfigError, match="api_key"):
        router.completion(model="g", messages=MESSAGES, api_key="sk-other")
