"""The context window as a requirement (issue 36): a prompt that cannot fit a route is not
sent there, and a provider's "context length exceeded" moves on only to larger windows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from policy_router import ConfigError, NoRouteError, Route, Router
from policy_router.testing import Fail, FakeProvider

from .conftest import CAPS, KINDS, call_as, fake_route

TOO_LONG = Fail(400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded")


def _prompt(words: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": "lorem " * words}]


def test_a_prompt_too_long_for_a_known_window_skips_the_route(fake: FakeProvider) -> None:
    """`gpt-4o`'s window is LiteLLM's `max_input_tokens` (128,000): a 150k-token prompt
    is never sent to it; the journey says how many tokens against what window."""
    router = Router([
        Route("openai/gpt-4o", group="g", api_base=fake.base_url, api_key="sk-test-4o"),
        fake_route(fake, "long", context_window=1_000_000),
    ])
    routed = router.route(model="g", messages=_prompt(150_000))
    assert routed.route.name == "openai/long"
    assert fake.requests("gpt-4o") == 0
    (skip,) = routed.journey.skips
    assert skip.check == "context_window" and skip.route == "openai/gpt-4o"
    assert skip.reason.startswith("prompt 15") and skip.reason.endswith("> window 128,000")


def test_the_reply_cap_counts_toward_the_window(fake: FakeProvider) -> None:
    """A prompt that fits alone but not with the call's `max_tokens`."""
    router = Router([fake_route(fake, "small", context_window=1_000), fake_route(fake, "big")])
    routed = router.route(model="g", messages=_prompt(200), max_tokens=900)
    assert routed.route.name == "openai/big"
    assert "+ reply cap 900 > window 1,000" in routed.journey.skips[0].reason


def test_a_reply_cap_past_the_model_s_output_limit_is_not_sent(fake: FakeProvider) -> None:
    router = Router([fake_route(fake, "short", output_limit=4_096), fake_route(fake, "long")])
    routed = router.route(model="g", messages=_prompt(3), max_tokens=10_000)
    assert routed.route.name == "openai/long" and fake.requests("short") == 0
    assert "reply cap 10,000 tokens > the model's output limit 4,096" in routed.journey.skips[0].reason


@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_no_route_fits_says_so_before_sending(fake: FakeProvider, mode: str) -> None:
    router = Router([fake_route(fake, "a", context_window=100), fake_route(fake, "b", context_window=200)])
    kw: dict[str, Any] = {"model": "g", "messages": _prompt(500)}
    with pytest.raises(NoRouteError) as raised:
        if mode == "sync":
            router.completion(**kw)
        elif mode == "async":
            asyncio.run(router.acompletion(**kw))
        else:
            router.completion(**kw, stream=True)
    assert fake.requests() == 0
    assert "> window 100" in str(raised.value) and "> window 200" in str(raised.value)


def test_a_short_prompt_is_never_counted(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """A prompt whose bytes fit every window is sent without counting its tokens."""
    import litellm

    def counted(*args: Any, **kwargs: Any) -> int:
        raise AssertionError("a short prompt was counted")

    monkeypatch.setattr(litellm, "token_counter", counted)
    router = Router([fake_route(fake, "a", context_window=8192)])
    assert router.route(model="g", messages=_prompt(10)).route.name == "openai/a"


def test_context_length_moves_on_only_to_a_larger_window(fake: FakeProvider) -> None:
    """The provider says the prompt is too long for 8,192: a route of the same window is
    skipped ("no larger"), the route itself is not asked again, a larger one answers."""
    fake.script("a", TOO_LONG)
    router = Router([
        fake_route(fake, "a", context_window=8_192),
        fake_route(fake, "same", context_window=8_192),
        fake_route(fake, "smaller", context_window=4_096),
        fake_route(fake, "larger", context_window=32_768),
    ])
    routed = router.route(model="g", messages=_prompt(20))
    assert routed.route.name == "openai/larger"
    assert fake.requests("a") == 1 and fake.requests("same") == 0 and fake.requests("smaller") == 0
    reasons = {s.route: s.reason for s in routed.journey.skips}
    assert "no larger than openai/a's 8,192" in reasons["openai/same"]
    assert "openai/smaller" in reasons


def test_context_length_with_no_larger_window_stops(fake: FakeProvider) -> None:
    """With no larger window left the request stops with the provider's error, not a
    second request that would fail alike; an unknown window is still asked."""
    fake.script("a", TOO_LONG)
    router = Router([fake_route(fake, "a", context_window=8_192), fake_route(fake, "b", context_window=8_192)])
    with pytest.raises(Exception, match="maximum context length") as raised:
        router.completion(model="g", messages=_prompt(20))
    assert "no route with a larger context window" in str(raised.value.journey)  # type: ignore[attr-defined]
    assert fake.requests("b") == 0
    fake.script("a", TOO_LONG)
    unknown = Router([fake_route(fake, "a", context_window=8_192), fake_route(fake, "c")])
    assert unknown.route(model="g", messages=_prompt(20)).route.name == "openai/c"


def test_a_context_length_error_is_no_fault_of_the_route(fake: FakeProvider) -> None:
    fake.script("a", TOO_LONG, TOO_LONG, TOO_LONG, TOO_LONG)
    router = Router([fake_route(fake, "a", context_window=8_192), fake_route(fake, "b", context_window=65_536)])
    for _ in range(4):
        router.route(model="g", messages=_prompt(20))
    assert router.health()["openai/a"].failures == 0 and not router.resting()


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "128k"])
def test_a_bad_context_window_names_the_field(bad: Any) -> None:
    with pytest.raises(ConfigError, match="context_window"):
        Route("openai/a", context_window=bad, capabilities=CAPS)


def test_a_model_list_reads_max_input_tokens(fake: FakeProvider) -> None:
    router = Router.from_litellm_model_list([
        {"model_name": "g", "litellm_params": {"model": "openai/gpt-4o-mini", "api_base": fake.base_url,
                                              "api_key": "sk-test-a"},
         "model_info": {"max_input_tokens": 50}},
        {"model_name": "g", "litellm_params": {"model": "openai/gpt-4o", "api_base": fake.base_url,
                                              "api_key": "sk-test-b"}},
    ])
    routed = router.route(model="g", messages=_prompt(100))
    assert routed.route.name == "openai/gpt-4o" and fake.requests("gpt-4o-mini") == 0


def _tools(words: int) -> list[dict[str, Any]]:
    return [{
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "lorem " * words,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }]


def _images(count: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What do these show?"}]
    parts += [
        {"type": "image_url", "image_url": {"url": f"https://example.com/{i}.png"}}
        for i in range(count)
    ]
    return [{"role": "user", "content": parts}]


WHAT_IS_SENT = {
    "tools": lambda: {"messages": _prompt(100), "tools": _tools(2_000)},
    "images": lambda: {"messages": _images(20)},
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("sent", sorted(WHAT_IS_SENT))
def test_the_window_counts_what_is_sent_beside_the_messages(
    fake: FakeProvider, sent: str, kind: str
) -> None:
    """Tool schemas (2,000 words) and image parts (20 images, which LiteLLM counts at 85
    tokens each) count toward a 1,500-token window although the messages' own bytes fit it:
    the small route is never sent to, and explain() lists the same skip."""
    router = Router([
        fake_route(fake, "small", context_window=1_500, capabilities={**CAPS, "images": True}),
        fake_route(fake, "big", context_window=1_000_000, capabilities={**CAPS, "images": True}),
    ])
    kwargs = WHAT_IS_SENT[sent]()
    verdicts = {v.route: v for v in router.explain(model="g", **kwargs).verdicts}
    assert verdicts["openai/small"].check == "context_window"
    assert verdicts["openai/big"].position == 1
    call_as(router, kind, model="g", **kwargs)
    assert fake.requests("small") == 0 and fake.requests("big") == 1


def test_the_route_s_own_reply_cap_counts_toward_its_window(fake: FakeProvider) -> None:
    """A route whose kwargs set `max_tokens=900` sends that cap with every call: a prompt
    that fits the window alone but not beside that cap is not sent there."""
    router = Router([
        fake_route(fake, "small", context_window=1_000, max_tokens=900),
        fake_route(fake, "big"),
    ])
    routed = router.route(model="g", messages=_prompt(200))
    assert routed.route.name == "openai/big" and fake.requests("small") == 0
    assert "+ reply cap 900 > window 1,000" in routed.journey.skips[0].reason
    verdicts = {v.route: v for v in router.explain(model="g", messages=_prompt(200)).verdicts}
    assert verdicts["openai/small"].check == "context_window"


@pytest.mark.parametrize(
    "said",
    [
        "This model's maximum prompt length is 131072 but the request contains 140000 tokens.",
        "The decoder prompt (length 9000) is longer than the maximum model length of 8192. "
        "Make sure that `max_model_len` is no smaller than the number of text tokens.",
        "Input length 9000 exceeds the context limit of 8192 for this deployment.",
        "request rejected: prompt token count (9001) is greater than the model window size",
    ],
    ids=["xai", "vllm", "unmapped-1", "unmapped-2"],
)
def test_a_provider_s_own_words_for_too_long_move_to_a_larger_window(
    fake: FakeProvider, said: str
) -> None:
    """xAI, vLLM and servers LiteLLM does not map say "too long" in their own words: the
    request moves on to a larger window, skipping one no larger, and the route is not
    blamed."""
    fake.script("a", Fail(400, said))
    router = Router([
        fake_route(fake, "a", context_window=8_192),
        fake_route(fake, "same", context_window=8_192),
        fake_route(fake, "larger", context_window=32_768),
    ])
    routed = router.route(model="g", messages=_prompt(20))
    assert routed.route.name == "openai/larger" and fake.requests("same") == 0
    assert router.health()["openai/a"].failures == 0


def test_a_bad_request_about_something_else_still_stops(fake: FakeProvider) -> None:
    """A 400 that is about the request but not its length stops, as before: every route
    would fail alike."""
    fake.script("a", Fail(400, "Invalid value for 'temperature': must be between 0 and 2."))
    router = Router([fake_route(fake, "a", context_window=8_192), fake_route(fake, "b", context_window=32_768)])
    with pytest.raises(Exception, match="temperature"):
        router.completion(model="g", messages=_prompt(20))
    assert fake.requests("b") == 0


@pytest.mark.parametrize("kind", KINDS)
def test_the_prompt_is_measured_once_for_the_budget_and_the_window(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A budgeted call to a group whose routes' windows are known measures its prompt's
    bound once, read by the budget and the window check alike (each measured it)."""
    from policy_router import Budget
    from policy_router.policies import bounds

    from .conftest import prices

    measured: list[int] = []
    real = bounds.unbounded_by  # the first step of every measure of a prompt's bound

    def counting(*args: Any, **kwargs: Any) -> Any:
        measured.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(bounds, "unbounded_by", counting)
    table = prices(a="1", b="1")
    router = Router(
        [fake_route(fake, "a", context_window=8192, prices=table), fake_route(fake, "b", context_window=4096, prices=table)],
        budget=Budget("10"),
    )
    call_as(router, kind, model="g", messages=_prompt(10))
    assert measured == [1]
    assert fake.requests("a") == 1
