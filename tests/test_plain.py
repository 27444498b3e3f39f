"""The plain chat call read in one pass (`drive.plain`): the same `Call` as the full
reading, for any call, and only ever taken for a call whose shape is on its allow-list."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from policy_router import Breaker, Budget, Route, Router
from policy_router.drive import plain
from policy_router.drive.planning import Planner
from policy_router.endpoints import endpoint
from policy_router.testing import FakeProvider

from .conftest import CAPS, MESSAGES, fake_route
from .test_express import _KNOWN, KEYWORDS

CHAT = endpoint("chat")


def _routers() -> list[Router]:
    routes = [
        Route(f"openai/{n}", group=g, api_base="http://127.0.0.1:9", api_key=f"sk-{n}", capabilities=CAPS)
        for n, g in (("a", "g"), ("b", "g"), ("c", "h"))
    ]
    return [
        Router(routes),
        Router(routes, breaker=Breaker(), deadline=5.0, wait_for_capacity=True),
        Router(routes, budget=Budget("10")),
    ]


ROUTERS = _routers()

TEXT = st.one_of(
    st.text("ab ", max_size=4),
    st.sampled_from(["é", "日本", "\ud800", ""]),  # not ASCII; a lone surrogate
)
CONTENT = st.one_of(
    TEXT,
    st.none(),
    st.integers(0, 2),
    st.lists(
        st.one_of(
            st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
            st.just({"type": "image_url", "image_url": {"url": "data:,"}}),
            st.just({"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}),
            TEXT,
        ),
        max_size=2,
    ),
)
MESSAGE = st.one_of(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", "assistant"]), "content": CONTENT},
        optional={
            "name": st.just("n"),
            "tool_calls": st.just([]),
            "cache_control": st.just({"type": "ephemeral"}),
            "x_unknown": st.integers(0, 1),
        },
    ),
    st.sampled_from(["hello", 3, None]),
)
MESSAGES_ANY = st.one_of(
    st.lists(MESSAGE, max_size=3),
    st.lists(MESSAGE, min_size=1, max_size=2).map(tuple),
    st.none(),
    st.just("hello"),
)
# The allow-list's own keywords, with values the full reading accepts and refuses, and
# every other keyword LiteLLM's signature has or nobody listed (`KEYWORDS`).
PLAIN_VALUES = st.dictionaries(
    st.sampled_from(sorted(plain.PLAIN_KWARGS)),
    st.one_of(st.none(), st.booleans(), st.integers(-1, 3), st.just("2"), st.floats(0, 1)),
    max_size=3,
)
# What a server adds to every call it makes for a client (its key's scope, the floor it
# asked for), with values the full reading accepts and refuses.
SERVED = st.fixed_dictionaries(
    {},
    optional={
        "scope": st.one_of(
            st.just({"key": "k"}), st.just({"key": "k", "team": "t", "user": "u", "tags": "a,b"}),
            st.just({"key": ""}), st.just({"nobody": "x"}), st.just("k"), st.none(),
        ),
        "on_device": st.sampled_from([False, True, "no", 0]),
    },
)
KWARGS = st.builds(
    lambda a, b: {**a, **b},
    st.one_of(PLAIN_VALUES, KEYWORDS, st.builds(lambda a, b: {**a, **b}, PLAIN_VALUES, KEYWORDS)),
    SERVED,
)
MODEL = st.sampled_from(["g", "h", "openai/a", "nope", None])


def _both(planner: Planner, model: Any, messages: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The call read with what plain calls left behind, and read in full."""
    for name in ("g", "h", "openai/a"):  # each model string's first plain call, read in full
        planner.prepare(CHAT, name, MESSAGES, {})
    assert planner._plain, "the first plain calls left what the next ones are read with"
    quick = _read(planner, model, messages, kwargs)
    known, planner._plain = planner._plain, {}
    try:
        full = _read(planner, model, messages, kwargs)
    finally:
        planner._plain = known
    return quick, full


def _read(planner: Planner, model: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
    """The call as the router reads it: its express lane's `Call` when `express` gives one
    (which must be the lane the `Call` takes), else `prepare`'s."""
    try:
        lane = planner.express("chat", model, messages, dict(kwargs))
        if lane is None:
            return planner.prepare(CHAT, model, messages, dict(kwargs))
        call = planner.plain_call(model, {**kwargs, "messages": messages})
        assert planner.lane(call) is lane
        return call
    except Exception as error:  # the same refusal, by type and words
        return (type(error), str(error))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(range(len(ROUTERS))), MODEL, MESSAGES_ANY, KWARGS)
@example(0, "g", [{"role": "user", "content": "hi"}], {"max_tokens": 0})
@example(1, "g", [{"role": "user", "content": "hi", "name": "n"}], {"temperature": 0.2, "n": 2})
@example(0, "g", [{"role": "user", "content": "\ud800"}], {})
@example(1, "g", [{"role": "user", "content": "hi"}], {"tools": True, "seed": 1})
@example(2, "openai/a", [{"role": "user", "content": "hi"}], {"seed": 1})
@example(2, "g", [{"role": "user", "content": "hi"}], {"scope": {"key": "k", "team": "t"}, "on_device": False})
@example(2, "g", [{"role": "user", "content": "hi"}], {"scope": {"key": ""}, "max_tokens": 0})
def test_a_call_is_read_as_the_full_reading_reads_it(
    which: int, model: Any, messages: Any, kwargs: dict[str, Any]
) -> None:
    """Whatever the call, the one-pass reading gives the `Call` the full reading gives (the
    same group, needs, keywords for LiteLLM, deadline, lane), or the same refusal."""
    quick, full = _both(ROUTERS[which]._life.now.planner, model, messages, kwargs)
    assert quick == full


@pytest.mark.parametrize("value", [True, 1, "x", {"type": "json_object"}, [{"type": "function"}]])
def test_every_keyword_of_litellm_and_one_nobody_listed_is_read_as_in_full(value: Any) -> None:
    """Each keyword of LiteLLM's whole space, and one nobody listed, on an otherwise plain
    call: the same `Call` or the same refusal as the full reading."""
    for router in ROUTERS:
        for key in [*_KNOWN, "stream", "mock_timeout", "x_nobody_listed"]:
            quick, full = _both(router._life.now.planner, "g", MESSAGES, {key: value, "temperature": 0})
            assert quick == full, key


def test_the_common_call_is_read_in_one_pass_and_nothing_else_is(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a group's first plain call, plain calls are read in one pass (and answered as
    before); a call with a keyword off the list, a content part or a non-ASCII text is not."""
    read: list[str] = []
    real, real_express = plain.call_of, Planner.express

    def spied(*args: Any) -> Any:
        read.append(args[1])
        return real(*args)

    def express(self: Planner, *args: Any) -> Any:
        lane = real_express(self, *args)
        if lane is not None:
            read.append(args[1])
        return lane

    monkeypatch.setattr(plain, "call_of", spied)
    monkeypatch.setattr(Planner, "express", express)
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker())
    before = fake.requests("a")
    first = router.completion(model="g", messages=MESSAGES)
    assert read == []
    second = router.completion(model="g", messages=MESSAGES, temperature=0.1, max_tokens=20)
    assert read == ["g"]
    journey = second._hidden_params["policy_router"]
    assert journey.answered_by == first._hidden_params["policy_router"].answered_by == "openai/a"
    assert [a.outcome for a in journey.attempts] == ["answered"]
    for kwargs in (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]},
        {"messages": [{"role": "user", "content": "héllo"}]},
        {"messages": MESSAGES, "metadata": {"k": "v"}},
        {"messages": MESSAGES, "timeout": 30},
    ):
        router.completion(model="g", **kwargs)
    assert read == ["g"]
    with pytest.raises(Exception, match="max_tokens must be a whole number"):
        router.completion(model="g", messages=MESSAGES, max_tokens=0)
    assert fake.requests("a") - before == 6
