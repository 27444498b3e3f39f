"""The answered attempt made when first read: an `Attempt` in every way a reader sees."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from litellm import EmbeddingResponse, ModelResponse, TextCompletionResponse

from policy_router import Breaker, Router
from policy_router.core.deferred import DeferredAttempt, answered
from policy_router.core.gate import listed_cost
from policy_router.core.journey import Attempt, Journey, Routed, journey_of, routed_of
from policy_router.core.outcomes import answer
from policy_router.endpoints.reading import (
    counts_of,
    hidden_of,
    hit_in,
    model_of,
    reply_of,
    usage_of,
)
from policy_router.ground.money import Usage
from policy_router.ground.route import Route
from policy_router.policies.candidate import Candidate, candidate_for
from policy_router.policies.requirements import Requirements
from policy_router.testing import FakeProvider, Reply

from .conftest import MESSAGES, fake_route, prices

FIELDS = [f.name for f in dataclasses.fields(Attempt)]


def _candidate(priced: bool) -> Candidate:
    route = Route(
        "openai/m", group="g", api_base="http://127.0.0.1:9", api_key="k",
        capabilities={"tools": True}, prices=prices(m="1.25") if priced else None,
    )
    return candidate_for(route, None, streams=False)


def _pair(priced: bool, usage: Usage | tuple[int, int] | None) -> tuple[DeferredAttempt, Attempt]:
    """The same answered attempt, deferred and made at once by `outcomes.answer`."""
    candidate = _candidate(priced)
    full = Usage(prompt=usage[0], completion=usage[1]) if type(usage) is tuple else usage
    plain = answer(
        candidate.route, "g", "req1", "chat", 0.25, listed_cost(candidate, full), full,
        model="m-2026",
    )
    return answered(candidate, "g", "req1", "chat", 0.25, usage, "m-2026"), plain


USAGES = [None, (7, 3), Usage(prompt=7, completion=3), Usage(prompt=9, completion=4, cache_read=2, reasoning=1)]


@pytest.mark.parametrize("priced", [True, False])
@pytest.mark.parametrize("usage", USAGES)
def test_a_deferred_attempt_reads_as_the_attempt_the_plan_makes(
    priced: bool, usage: Any
) -> None:
    """Every field, equality both ways, the hash, str, repr and asdict are the plain
    record's, priced or not, with the common usage, a full one, or none."""
    later, plain = _pair(priced, usage)
    assert isinstance(later, Attempt)
    assert [getattr(later, f) for f in FIELDS] == [getattr(plain, f) for f in FIELDS]
    assert later == plain and plain == later
    assert hash(later) == hash(plain)
    assert str(later) == str(plain)
    assert repr(later) == repr(plain)
    assert dataclasses.asdict(later) == dataclasses.asdict(plain)
    assert later.ok and later.cost == plain.cost


@pytest.mark.parametrize("field", FIELDS)
def test_reading_any_one_field_first_gives_the_plain_value(field: str) -> None:
    """Whichever field is read first, it and every other read the plain record's."""
    later, plain = _pair(True, (7, 3))
    assert getattr(later, field) == getattr(plain, field)
    assert [getattr(later, f) for f in FIELDS] == [getattr(plain, f) for f in FIELDS]


def test_a_deferred_attempt_is_frozen_and_copies_as_a_plain_one() -> None:
    """Setting a field raises as on any Attempt; a copy, a deep copy and a pickle are plain
    Attempts equal to it; `replace` gives the changed record."""
    later, plain = _pair(True, (7, 3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        later.route = "other"  # type: ignore[misc]
    for made in (copy.copy(later), copy.deepcopy(later), pickle.loads(pickle.dumps(later))):
        assert type(made) is Attempt and made == plain
    changed = dataclasses.replace(later, then="next route")
    assert changed.then == "next route" and changed.route == plain.route
    assert changed != plain
    with pytest.raises(AttributeError):
        _ = later.no_such_field  # type: ignore[attr-defined]


def _read_at_once(later: DeferredAttempt, threads: int) -> list[Any]:
    """What each of `threads` threads, started together, reads first of `later`."""
    seen: list[Any] = []
    start = threading.Barrier(threads)

    def read() -> None:
        start.wait()
        seen.append((later.cost, later.usage, later.route_id, str(later)))

    running = [threading.Thread(target=read) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return seen


def test_threads_reading_at_once_all_see_the_same_record() -> None:
    """Several threads reading a fresh deferred attempt at once see the plain values."""
    for _ in range(50):
        later, plain = _pair(True, (7, 3))
        assert _read_at_once(later, 4) == [(plain.cost, plain.usage, plain.route_id, str(plain))] * 4


def test_the_lanes_journey_holds_a_record_equal_to_the_plans(fake: FakeProvider) -> None:
    """A call answered on the express lane and the same call planned give journeys whose
    attempts are equal, read the same and print the same (times aside)."""
    fake.script("a", Reply("hi", usage=(7, 3)), Reply("hi", usage=(7, 3)))
    router = Router([fake_route(fake, "a", prices=prices(a="2.5"))], breaker=Breaker())
    lane = router.route(model="g", messages=MESSAGES).journey
    planned = router.route(model="g", messages=MESSAGES, deadline=30.0).journey
    (fast,), (slow,) = lane.steps, planned.steps
    assert isinstance(fast, DeferredAttempt) and type(slow) is Attempt
    fast, slow = dataclasses.replace(fast, elapsed=0.0), dataclasses.replace(slow, elapsed=0.0)
    assert fast == slow
    assert fast.cost is not None and fast.usage == Usage(prompt=7, completion=3)
    assert repr(lane.steps[0]).startswith("Attempt(route='openai/a', outcome='answered'")


def _response(usage: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        id="r", model="m", usage=usage,
        choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x"}}],
    )


DETAILS = st.one_of(
    st.none(),
    st.fixed_dictionaries({}, optional={"cached_tokens": st.integers(0, 5), "cache_creation_tokens": st.integers(0, 5)}),
)
USAGE = st.fixed_dictionaries(
    {"prompt_tokens": st.integers(0, 10**6), "completion_tokens": st.integers(0, 10**6)},
    optional={
        "prompt_tokens_details": DETAILS,
        "completion_tokens_details": st.one_of(st.none(), st.fixed_dictionaries({"reasoning_tokens": st.integers(0, 5)})),
        "cache_creation_input_tokens": st.integers(0, 5),
        "cache_read_input_tokens": st.integers(0, 5),
        "x_nobody_listed": st.integers(0, 5),
    },
)


@given(USAGE)
def test_the_common_replys_counts_are_what_the_whole_reading_gives(usage: dict[str, Any]) -> None:
    """Any usage LiteLLM may report, details, cache counts and fields nobody listed
    included: the two counts are given only when the whole reading is those counts alone,
    and then equal it; anything else is left to the whole reading (None)."""
    response = _response(usage)
    counts, full = counts_of(response), usage_of(response)
    if counts is not None:
        assert full == Usage(prompt=counts[0], completion=counts[1])
    plain = set(usage) <= {"prompt_tokens", "completion_tokens"} or all(
        usage.get(k) is None for k in set(usage) - {"prompt_tokens", "completion_tokens"}
    )
    if plain and usage["prompt_tokens"] > 0:  # the common reply, read in one step
        assert counts == (usage["prompt_tokens"], usage["completion_tokens"])
    if usage["prompt_tokens"] <= 0:  # LiteLLM's placeholder for a missing usage: none
        assert counts is None and full is None


def test_a_response_without_usage_gives_no_counts() -> None:
    """No usage, or a usage that is not LiteLLM's, is left to the whole reading."""
    response = _response({"prompt_tokens": 1, "completion_tokens": 2})
    response.usage = None  # type: ignore[assignment]
    assert counts_of(response) is None and usage_of(response) is None
    assert counts_of(object()) is None and counts_of(None) is None


def test_the_quick_makers_make_what_init_makes() -> None:
    """`journey_of` and `routed_of` set every field of the class, in order: the objects
    equal, print and copy as the ones `__init__` makes (a field added to either class and
    not to its maker fails here)."""
    later, _ = _pair(True, (7, 3))
    route = _candidate(True).route
    made = journey_of("g", Requirements(tools=True), (later,), "openai/m", 0.5, "req1")
    init = Journey(group="g", requirements=Requirements(tools=True), steps=(later,), answered_by="openai/m", elapsed=0.5, id="req1")
    for quick, slow in ((made, init), (routed_of("r", route, made), Routed("r", route, init))):
        assert type(quick) is type(slow)
        assert [getattr(quick, f.name) for f in dataclasses.fields(slow)] == [
            getattr(slow, f.name) for f in dataclasses.fields(slow)
        ]
        assert quick == slow and str(quick) == str(slow) and repr(quick) == repr(slow)
        assert copy.copy(quick) == slow


def test_no_output_of_a_deferred_attempt_carries_its_routes_secret() -> None:
    """The record keeps its route (and so the route's key) until it is read; nothing made
    from it shows the key: str, repr, a copy, a pickle, asdict."""
    secret = "sk-deferred-secret-7d1f"
    route = Route(
        "openai/m", group="g", api_base="http://127.0.0.1:9", api_key=secret,
        capabilities={"tools": True}, prices=prices(m="1.25"),
    )
    later = answered(candidate_for(route, None, streams=False), "g", "r1", "chat", 0.1, (7, 3), "m")
    outputs = [
        str(later), repr(later), repr(copy.copy(later)), repr(copy.deepcopy(later)),
        repr(dataclasses.asdict(later)), pickle.dumps(later).decode("latin-1"),
    ]
    assert later.route == "openai/m"
    assert not [o for o in outputs if secret in o]


def _reply(kind: str, usage: dict[str, Any] | None, model: Any, hit: Any) -> Any:
    """A reply of one of the shapes the lane may be given, with `usage`, `model` and a
    `cache_hit` of `hit` (or none) in its hidden params where it has them."""
    if kind == "namespace":  # not LiteLLM's: plain attributes only
        return SimpleNamespace(model=model, usage=usage, _hidden_params={"cache_hit": hit})
    if kind == "none":
        return None
    made: Any = {
        "chat": lambda: ModelResponse(model=model, usage=usage),
        "text": lambda: TextCompletionResponse(model=model, usage=usage),
        "embedding": lambda: EmbeddingResponse(model=model, usage=usage),
    }[kind]()
    if hit is not None and isinstance(made._hidden_params, dict):
        made._hidden_params["cache_hit"] = hit
    return made


@given(
    st.sampled_from(["chat", "text", "embedding", "namespace", "none"]),
    st.one_of(st.none(), USAGE),
    st.one_of(st.none(), st.just(""), st.just("m-2026"), st.integers(0, 3)),
    st.one_of(st.none(), st.booleans(), st.just("true")),
)
def test_the_replys_one_step_reading_is_each_readings_own(
    kind: str, usage: dict[str, Any] | None, model: Any, hit: Any
) -> None:
    """Whatever the reply (chat, text, embedding, an object that is not LiteLLM's, none),
    its usage (details, cache counts, fields nobody listed) and what it says of its model
    and of LiteLLM's cache: `reply_of` gives what the four readings give one by one."""
    try:
        reply = _reply(kind, usage, model, hit)
    except Exception:  # a shape LiteLLM itself refuses to build
        return
    hidden, cached, counts, said = reply_of(reply)
    assert hidden is hidden_of(reply)
    assert cached == hit_in(hidden) and type(cached) is bool
    assert counts == counts_of(reply)
    assert said == model_of(reply)
