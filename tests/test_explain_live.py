"""`explain` says what the live call does (issue 38): over generated route tables and every
built-in ordering (sticky over each it takes included), the routes `explain` would try, in
its order, are the routes the live call tries when every one of them fails."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_router import Budget, Order, PriceTable, Route, Router
from policy_router.testing import Fail, FakeProvider

from .conftest import CAPS, MESSAGES

ORDERS: list[Any] = [
    Order.AS_LISTED, Order.CHEAPEST, Order.HEALTHIEST, Order.ROUND_ROBIN, Order.FASTEST,
    Order.LEAST_BUSY, Order.MOST_HEADROOM,
]
STICKY_THEN = [Order.AS_LISTED, Order.CHEAPEST, Order.HEALTHIEST, Order.ROUND_ROBIN, Order.FASTEST]


@st.composite
def tables(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(2, 5))
    names = [f"r{i}" for i in range(count)]
    rates = {n: draw(st.none() | st.sampled_from(["0.5", "1", "2", "5", "10"])) for n in names}
    if draw(st.booleans()):
        order: Any = draw(st.sampled_from(ORDERS))
    else:
        first = draw(st.lists(st.sampled_from([f"openai/{n}" for n in names]), min_size=1, max_size=count, unique=True))
        order = Order.sticky(first, then=draw(st.sampled_from(STICKY_THEN)))
    return {
        "names": names,
        "rates": rates,
        "order": order,
        "budget": draw(st.booleans()),
        "warm": draw(st.lists(st.sampled_from(names), max_size=4)),
        "mode": draw(st.sampled_from(["sync", "async"])),
        "max_tokens": draw(st.none() | st.integers(1, 500)),
    }


def _router(fake: FakeProvider, table: dict[str, Any]) -> Router:
    priced = {n: r for n, r in table["rates"].items() if r is not None}
    prices = PriceTable.from_dict({
        "currency": "USD", "as_of": "2026-12-01", "source": "test",
        "models": {f"openai/{n}": {"input": r, "output": r} for n, r in priced.items()},
    })
    routes = [
        Route(f"openai/{n}", group="g", api_base=fake.base_url, api_key=f"sk-test-{n}",
              capabilities=CAPS, prices=prices, rpm=10_000, output_limit=1000)
        for n in table["names"]
    ]
    return Router(
        routes, order=table["order"], breaker=None,
        budget=Budget("1000", unpriced="allow") if table["budget"] else None,
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables())
def test_the_live_order_is_what_explain_said(fake: FakeProvider, table: dict[str, Any]) -> None:
    fake.reset()
    router = _router(fake, table)
    kw: dict[str, Any] = {} if table["max_tokens"] is None else {"max_tokens": table["max_tokens"]}
    for name in table["warm"]:  # some history: failures, latencies, turns
        fake.script(name, Fail(503))
        with contextlib.suppress(Exception):
            router.completion(model="g", messages=MESSAGES, **kw)
    fake.reset()
    said = [v.route for v in router.explain(model="g", messages=MESSAGES, **kw).verdicts if v.would_try]
    for name in table["names"]:
        fake.script(name, Fail(503))
    try:
        if table["mode"] == "sync":
            router.completion(model="g", messages=MESSAGES, **kw)
        else:
            asyncio.run(router.acompletion(model="g", messages=MESSAGES, **kw))
    except Exception as error:
        journey = error.journey  # type: ignore[attr-defined]
    else:
        raise AssertionError("every route was scripted to fail")
    tried = [a.route for a in journey.attempts]
    assert tried == said, (table, said, tried)
