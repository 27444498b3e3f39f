"""Every billed byte is bounded, whatever field carries it, and a bill the request cannot
show makes the bound infinite (issue: promises by construction, part 2).

FakeProvider bills every field it receives but a few control fields (`testing.billing`),
as an honest provider would, so a field the router forgets to bound is caught here.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import create_model

from policy_router import Budget, Money, OverBudgetError, PriceTable, Route, Router
from policy_router.policies.billed import FREE
from policy_router.testing import FakeProvider, Reply

from .conftest import KEY_PREFIX
from .test_bounds import Books

# $0.001 a token in and out: a $1 cap holds 1,000 tokens.
PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-12-01",
        "source": "test: every token costs a tenth of a cent",
        "models": {"openai/honest": {"input": "1000", "output": "1000"}},
    }
)
CAPS = {"tools": True, "structured_output": True, "streaming": True}
WORDS = " ".join(f"word{i}" for i in range(200))


def _router(fake: FakeProvider, cap: str = "1.00", strict: bool = False) -> tuple[Router, Books]:
    books = Books()
    route = Route(
        "openai/honest", group="g", api_base=fake.base_url, api_key=f"{KEY_PREFIX}h",
        capabilities=CAPS, prices=PRICES,
    )
    return Router([route], budget=Budget(cap, strict=strict), store=books), books


def _schema(fields: int) -> dict[str, Any]:
    props = {f"field_number_{i}": {"type": "string", "description": f"the answer's part {i}"} for i in range(fields)}
    return {"type": "json_schema", "name": "answer", "schema": {"type": "object", "properties": props}}


# -- the reported cases ------------------------------------------------------------------------
def test_a_responses_schema_in_text_is_bounded(fake: FakeProvider) -> None:
    """A 60-field schema in Responses' `text` is billed input: it is reserved before
    sending, so the call is refused rather than spending past the cap."""
    fake.script("honest", Reply("ok"))
    router, _ = _router(fake)
    with pytest.raises(OverBudgetError):
        router.responses(model="g", input="hi", text={"format": _schema(60)}, max_output_tokens=10)
    assert fake.requests() == 0 and router.spending().spent == Money(0)


def test_a_pydantic_text_format_is_bounded_as_its_schema(fake: FakeProvider) -> None:
    """`text_format=` a pydantic class is reserved as the schema it is sent as."""
    model = create_model("Answer60", **{f"field_number_{i}": (str, ...) for i in range(60)})  # type: ignore[call-overload]
    router, _ = _router(fake, cap="0.50")
    with pytest.raises(OverBudgetError):
        router.responses(model="g", input="hi", text_format=model, max_output_tokens=10)
    assert fake.requests() == 0


def test_a_completion_suffix_is_bounded(fake: FakeProvider) -> None:
    """A text completion's `suffix` is billed input, and reserved as such."""
    router, _ = _router(fake)
    with pytest.raises(OverBudgetError):
        router.text_completion(model="g", prompt="Once", suffix=WORDS * 8, max_tokens=10)
    assert fake.requests() == 0


def test_a_batch_of_prompts_is_bounded_once_per_prompt(fake: FakeProvider) -> None:
    """`prompt=[...]*8` with `max_tokens=100` may bill 8 replies of 100 tokens: 800 tokens
    of reply are reserved, more than a $0.50 cap holds."""
    fake.script("honest", Reply(WORDS))
    router, _ = _router(fake, cap="0.50")
    with pytest.raises(OverBudgetError):
        router.text_completion(model="g", prompt=["Once upon a time"] * 8, max_tokens=100)
    assert fake.requests() == 0
    one, _ = _router(fake, cap="0.50")
    one.text_completion(model="g", prompt=["Once upon a time"], max_tokens=100)
    assert one.spending().spent <= one.spending().cap


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"previous_response_id": "resp_abc"}, "previous_response_id"),
        ({"tools": [{"type": "web_search_preview"}]}, "tools[0]"),
        ({"tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "tools[0]"),
        ({"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}, "tools[0]"),
    ],
)
def test_billing_the_request_cannot_show_is_unbounded(
    fake: FakeProvider, kwargs: dict[str, Any], field: str
) -> None:
    """Server-side state and built-in tools bill what the request cannot show: a strict
    budget refuses before sending, naming the field; a lenient one sends and then says
    overshoot was possible."""
    strict, _ = _router(fake, cap="100.00", strict=True)
    with pytest.raises(OverBudgetError, match=field.replace("[", r"\[")) as caught:
        strict.responses(model="g", input="hi", max_output_tokens=10, **kwargs)
    assert fake.requests() == 0 and "strict" in str(caught.value)
    lenient, _ = _router(fake, cap="100.00")
    if "previous_response_id" in kwargs:  # a conversation the route really holds
        made = lenient.responses(model="g", input="first", max_output_tokens=10).id
        kwargs = {**kwargs, "previous_response_id": made}
    lenient.responses(model="g", input="hi", max_output_tokens=10, **kwargs)
    assert lenient.spending().overshoot_possible


# -- the generated space ---------------------------------------------------------------------
unknown_keys = st.from_regex(r"\Ax_[a-z]{1,10}\Z", fullmatch=True).filter(lambda k: k not in FREE)
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    endpoint = draw(st.sampled_from(["chat", "responses", "completion"]))
    kwargs: dict[str, Any] = {}
    if endpoint == "chat":
        kwargs["messages"] = [{"role": "user", "content": draw(texts) or "hi"}]
        kwargs["max_tokens"] = draw(st.integers(1, 300))
        kwargs["n"] = draw(st.integers(1, 3))
        if draw(st.booleans()):
            kwargs["response_format"] = _schema(draw(st.integers(1, 30)))
    elif endpoint == "responses":
        kwargs["input"] = draw(texts) or "hi"
        kwargs["max_output_tokens"] = draw(st.integers(1, 300))
        if draw(st.booleans()):
            kwargs["instructions"] = draw(texts)
        if draw(st.booleans()):
            kwargs["text"] = {"format": _schema(draw(st.integers(1, 30)))}
    else:
        prompt = draw(texts) or "Once"
        kwargs["prompt"] = draw(st.sampled_from([prompt, [prompt] * draw(st.integers(1, 4))]))
        kwargs["max_tokens"] = draw(st.integers(1, 200))
        kwargs["n"] = draw(st.integers(1, 2))
        if draw(st.booleans()):
            kwargs["suffix"] = draw(texts)
    # Fields nobody listed, carrying text: counted by the router, billed by the provider.
    kwargs.update(draw(st.dictionaries(unknown_keys, json_values, max_size=3)))
    return endpoint, kwargs


_CALL = {"chat": "completion", "responses": "responses", "completion": "text_completion"}


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls(), st.sampled_from(["0.20", "1.00", "5.00"]))
def test_spent_stays_under_the_cap_over_every_endpoints_keyword_space(
    fake: FakeProvider, call: tuple[str, dict[str, Any]], cap: str
) -> None:
    """Any endpoint, any billed field (unknown ones included): a bounded call is never
    billed above its reservation, and spent <= cap whenever no call was unbounded."""
    fake.reset()
    fake.script("honest", Reply(WORDS))
    router, books = _router(fake, cap=cap)
    endpoint, kwargs = call
    extra = {"messages": kwargs.pop("messages")} if endpoint == "chat" else {}
    try:
        getattr(router, _CALL[endpoint])(model="g", **extra, **kwargs)
    except OverBudgetError:
        assert fake.requests() == 0
    except Exception as failed:  # a field the provider's API refuses: nothing is billed
        assert "400" in str(failed) or "not sent" in str(failed) or "BadRequest" in type(failed).__name__, failed
    for reserved, cost, bounded, _measured in books.bills:
        assert cost <= reserved or not bounded, (reserved, cost, kwargs)
    spending = router.spending()
    if not spending.overshoot_possible:
        assert spending.spent <= spending.cap
