"""The budget's bound counts everything a provider bills, for every request shape LiteLLM
accepts: generated requests against a FakeProvider that bills honestly never pass the cap
whenever the bound was finite."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, create_model

from policy_router import Budget, InMemoryStore, Money, OverBudgetError, PriceTable, Route, Router
from policy_router.policies.bounds import RequestFacts, prompt_bound, reply_bound
from policy_router.testing import Cut, FakeProvider, Reply

from .conftest import KEY_PREFIX

CAPS = {"tools": True, "images": True, "structured_output": True, "streaming": True}
PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "test: input dear, output dearer, so every part of a bill matters",
        "models": {f"openai/{m}": {"input": "20", "output": "200"} for m in ("limited", "open")},
    }
)
LONG = Reply(" ".join(f"w{i}" for i in range(300)))  # longer than any cap below
LIMIT = 40  # the "limited" model's own output limit, declared on its route


def schema_class(fields: int) -> type[BaseModel]:
    return create_model(  # type: ignore[no-any-return,call-overload]
        f"Answer{fields}", **{f"field_number_{i}": (str, ...) for i in range(fields)}
    )


def tool(i: int, params: int) -> dict[str, Any]:
    props = {f"arg_{j}": {"type": "string", "description": f"argument {j}"} for j in range(params)}
    return {
        "type": "function",
        "function": {
            "name": f"tool_{i}",
            "description": "does a thing " * 3,
            "parameters": {"type": "object", "properties": props},
        },
    }


# The fake bills 765 tokens an image; a budget that allows 1,000 keeps images affordable.
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}

response_formats = st.one_of(
    st.none(),
    st.builds(schema_class, st.integers(1, 40)),
    st.builds(
        lambda k: {
            "type": "json_schema",
            "json_schema": {"name": "a", "schema": schema_class(k).model_json_schema()},
        },
        st.integers(1, 20),
    ),
    st.just({"type": "json_object"}),
)
caps = st.sampled_from(["neither", "max_tokens", "max_completion_tokens", "both"])


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    words = draw(st.integers(1, 60))
    content: Any = " ".join(["lorem"] * words)
    images = draw(st.integers(0, 2))
    if images:
        content = [{"type": "text", "text": content}, *([IMAGE] * images)]
    kwargs: dict[str, Any] = {"messages": [{"role": "user", "content": content}]}
    n = draw(st.one_of(st.none(), st.integers(1, 4)))
    if n is not None:
        kwargs["n"] = n
    which = draw(caps)
    if which in ("max_tokens", "both"):
        kwargs["max_tokens"] = draw(st.integers(1, 60))
    if which in ("max_completion_tokens", "both"):
        kwargs["max_completion_tokens"] = draw(st.integers(1, 60))
    response_format = draw(response_formats)
    if response_format is not None:
        kwargs["response_format"] = response_format
    tools = draw(st.integers(0, 3))
    if tools:
        kwargs["tools"] = [tool(i, draw(st.integers(0, 12))) for i in range(tools)]
    if draw(st.booleans()):
        kwargs["prediction"] = {"type": "content", "content": " ".join(["guess"] * 20)}
    kwargs["stream"] = draw(st.booleans())
    return kwargs


class Books(InMemoryStore):
    """The in-memory store, keeping each reservation beside the bill that settled it."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[str, int] = {}
        self.bills: list[tuple[int, int, bool, bool]] = []

    def reserve(self, budget: str, hold: str, amount: int, cap: int | None) -> bool:
        ok = super().reserve(budget, hold, amount, cap)
        if ok:
            self.held[hold] = amount
        return ok

    def settle(self, budget: str, hold: str, cost: int, *, measured: bool, bounded: bool) -> None:
        super().settle(budget, hold, cost, measured=measured, bounded=bounded)
        self.bills.append((self.held.get(hold, 0), cost, bounded, measured))


async def one(router: Router, kwargs: dict[str, Any], cut: bool) -> tuple[str, Any]:
    try:
        if kwargs.get("stream"):
            stream = await router.acompletion(model="g", **kwargs)
            try:
                async for _ in stream:
                    pass
            except openai.APIError:  # LiteLLM's errors all are (litellm.APIError is not a base)
                assert cut, "only a scripted cut fails a stream here"
            return "answered", stream.journey
        routed = await router.aroute(model="g", **kwargs)
        return "answered", routed.journey
    except OverBudgetError as refused:
        return "refused", refused.journey
    except openai.APIError as failed:  # a cut body: the connection closed
        assert cut
        return "failed", failed.journey  # type: ignore[attr-defined]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(requests(), min_size=1, max_size=6),
    st.integers(20_000, 400_000),
    st.booleans(),
    st.booleans(),
)
def test_spent_never_passes_the_cap_when_the_bound_was_finite(
    fake: FakeProvider, calls: list[dict[str, Any]], cap: int, strict: bool, cut: bool
) -> None:
    """Concurrent requests of any shape: no bounded call is billed above its reservation;
    requests received equal attempts, nothing stays reserved, the journeys' costs add up to
    the spend, and spent <= cap unless a call ran with no finite bound (which a strict
    budget never lets run)."""
    fake.reset()
    fake.limits("limited", max_output=LIMIT)
    if cut:
        fake.script("limited", Cut(after=3, reply=LONG))
    for name in ("limited", "open"):
        fake.script(name, *[LONG] * len(calls))
    router = Router(
        [
            Route(
                f"openai/{name}",
                group="g",
                api_base=fake.base_url,
                api_key=f"{KEY_PREFIX}{name}",
                capabilities=CAPS,
                prices=PRICES,
                **({"output_limit": LIMIT} if name == "limited" else {}),
            )
            for name in ("open", "limited")
        ],
        budget=Budget(Money(cap, "USD"), strict=strict, image_tokens=1000),
        store=(books := Books()),
    )

    async def all_of_them() -> list[tuple[str, Any]]:
        return await asyncio.gather(*(one(router, dict(kw), cut) for kw in calls))

    results = asyncio.run(all_of_them())
    for reserved, cost, bounded, measured in books.bills:
        assert cost <= reserved or not bounded, (reserved, cost)
        assert measured or cost == reserved
    journeys = [j for _, j in results]
    spending = router.spending()
    assert fake.requests() == sum(len(j.attempts) for j in journeys)
    assert spending.reserved == Money(0) and spending.in_flight == 0
    costs = [a.cost for j in journeys for a in j.attempts if a.cost is not None]
    assert spending.spent == sum(costs, Money(0))
    if strict:
        assert not spending.overshoot_possible
    if not spending.overshoot_possible:
        assert spending.spent <= spending.cap


def test_the_reply_bound_multiplies_by_n_and_reads_both_caps() -> None:
    """n choices are n replies; with both caps the smaller binds; a prediction is extra."""
    facts = RequestFacts(prompt_tokens=0, prompt_bound=10, reply_tokens=100, choices=8, reply_extra=5)
    assert reply_bound(facts, limit=None) == 8 * 100 + 5
    assert reply_bound(RequestFacts(prompt_tokens=0, prompt_bound=10, reply_tokens=None), limit=40, choices=2) == 80
    assert reply_bound(RequestFacts(prompt_tokens=0, prompt_bound=10, reply_tokens=None), limit=None) is None


def test_a_pydantic_response_format_counts_as_the_schema_litellm_sends() -> None:
    """A 40-field class counts as its ~2.7 kB schema, not as its name."""
    base = prompt_bound({"messages": [{"role": "user", "content": "hi"}]})
    with_schema = prompt_bound(
        {"messages": [{"role": "user", "content": "hi"}], "response_format": schema_class(40)}
    )
    assert base is not None and with_schema is not None
    assert with_schema - base > 2000


@pytest.mark.parametrize(
    "part",
    [
        {"type": "file", "file": {"file_id": "file-abc"}},
        {"type": "input_file", "file_url": "https://example.com/a.pdf"},
        {"type": "video_url", "video_url": {"url": "https://example.com/a.mp4"}},
    ],
)
def test_a_file_or_video_has_no_finite_bound(part: dict[str, Any]) -> None:
    """Pages and seconds are billed, not bytes: such a prompt is unbounded."""
    kwargs = {"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, part]}]}
    assert prompt_bound(kwargs) is None


def test_images_in_a_tool_result_are_counted() -> None:
    """An image nested in a tool message's content counts like any other."""
    nested = {
        "messages": [
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "see"}]},
            {"role": "user", "content": [{"type": "tool_result", "content": [IMAGE, IMAGE]}]},
        ]
    }
    plain = prompt_bound(nested, image_tokens=0)
    assert plain is not None and prompt_bound(nested) == plain + 2 * 50_000


def test_a_strict_budget_refuses_an_unbounded_call_before_sending(fake: FakeProvider) -> None:
    """No max_tokens and no known output limit: refused, naming why; nothing sent."""
    router = Router(
        [
            Route(
                "openai/open",
                group="g",
                api_base=fake.base_url,
                api_key=f"{KEY_PREFIX}open",
                capabilities=CAPS,
                prices=PRICES,
            )
        ],
        budget=Budget("1.00", strict=True),
    )
    with pytest.raises(OverBudgetError, match="no finite worst case under a strict budget"):
        router.completion(model="g", messages=[{"role": "user", "content": "hi"}])
    assert fake.requests() == 0
    router.completion(model="g", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    assert fake.requests() == 1


def test_a_known_model_is_bounded_by_its_output_limit_without_max_tokens(
    fake: FakeProvider,
) -> None:
    """LiteLLM's max_output_tokens bounds a call that sets no max_tokens (16,384 for
    gpt-4o-mini): the reservation says so, and the call counts as bounded."""
    prices = PriceTable.from_dict(
        {
            "currency": "USD",
            "as_of": "2026-11-01",
            "source": "t",
            "models": {"openai/gpt-4o-mini": {"input": "0", "output": "1"}},
        }
    )
    router = Router(
        [
            Route(
                "openai/gpt-4o-mini",
                group="g",
                api_base=fake.base_url,
                api_key=f"{KEY_PREFIX}mini",
                prices=prices,
                reach="on_device",
            )
        ],
        budget=Budget("0.016383"),
    )
    with pytest.raises(OverBudgetError, match=r"worst case \$0\.016384"):
        router.completion(model="g", messages=[{"role": "user", "content": "hi"}])
    assert fake.requests() == 0


_TEXT = st.text(max_size=12)
_PROMPTS = st.one_of(
    _TEXT,
    st.lists(_TEXT, max_size=4),
    st.lists(st.integers(0, 50_000), max_size=6),  # token ids, as `prompt`/`input` allow
    st.lists(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]), "content": _TEXT}),
        max_size=3,
    ),
)


@given(name=st.sampled_from(["messages", "input", "prompt", "instructions"]), value=_PROMPTS)
def test_every_prompt_shape_of_every_endpoint_has_a_bound_that_counts_its_text(
    name: str, value: Any
) -> None:
    """Texts of any length (two characters included, which once looked like a message),
    lists of texts, token ids and messages, under each endpoint's prompt argument: a
    bound, never below the UTF-8 bytes of the text it carries."""
    bound = prompt_bound({name: value}, texts=(name,))
    items = value if isinstance(value, list) else [value]
    texts = [i["content"] if isinstance(i, dict) else i for i in items if not isinstance(i, int)]
    assert bound is not None
    assert bound >= sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)


def test_a_budgeted_embedding_of_a_two_letter_word_is_bounded_and_sent(
    fake: FakeProvider,
) -> None:
    router = Router(
        [
            Route(
                "openai/e",
                api_base=fake.base_url,
                api_key=f"{KEY_PREFIX}e",
                group="g",
                capabilities={"embedding": True},
            )
        ],
        budget=Budget("1", unpriced="allow"),
    )
    routed = router.route(model="g", endpoint="embedding", input=["Hi"])
    assert routed.attempts == 1 == fake.requests("e") and router.spending().reserved.micros == 0
