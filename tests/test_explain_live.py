"""`explain` says what the live call does (issue 38): over generated route tables and every
built-in ordering (sticky over each it takes included), the routes `explain` would try, in
its order, are the routes the live call tries when every one of them fails."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from hypothesis import HealthCheck, example, given, settings
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


@st.composite
def scored_tables(draw: st.DrawFn) -> dict[str, Any]:
    """Routes whose input and output rates differ (so a request's own token counts change
    which is cheaper), ordered by `Order.SCORE` with every weight drawn, cost's included,
    alone or after a sticky list."""
    count = draw(st.integers(2, 4))
    names = [f"r{i}" for i in range(count)]
    rate = st.sampled_from(["0.1", "1", "3", "20", "60"])
    return {
        "names": names,
        "rates": {n: draw(st.none() | st.tuples(rate, rate)) for n in names},
        "weights": {
            "success_weight": draw(st.sampled_from([0.5, 1.0, 3.0])),
            "speed_weight": draw(st.sampled_from([0.0, 1.0])),
            "cost_weight": draw(st.sampled_from([0.0, 0.5, 1.0, 5.0])),
        },
        "sticky": draw(st.booleans()),
        "mode": draw(st.sampled_from(["sync", "async"])),
        "words": draw(st.sampled_from([1, 300, 3000])),
        "max_tokens": draw(st.none() | st.sampled_from([1, 50, 4000])),
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=scored_tables())
@example(table={  # a short prompt and a long reply: the route cheap on output is cheaper
    "names": ["r0", "r1"], "rates": {"r0": ("0.1", "60"), "r1": ("60", "0.1")},
    "weights": {"success_weight": 0.5, "speed_weight": 0.0, "cost_weight": 5.0},
    "sticky": False, "mode": "sync", "words": 1, "max_tokens": 4000,
})
def test_the_live_order_under_a_score_with_a_cost_weight_is_what_explain_said(
    fake: FakeProvider, tmp_path_factory: Any, table: dict[str, Any]
) -> None:
    """`Order.SCORE` weighing cost ranks by the request's own estimated price: the live call
    counts the prompt as `explain` does, so it tries the routes in the order explain said."""
    from policy_router import Score, SQLiteMetrics

    fake.reset()
    priced = {n: r for n, r in table["rates"].items() if r is not None}
    prices = PriceTable.from_dict({
        "currency": "USD", "as_of": "2026-12-01", "source": "test",
        "models": {f"openai/{n}": {"input": r[0], "output": r[1]} for n, r in priced.items()},
    })
    routes = [
        Route(f"openai/{n}", group="g", api_base=fake.base_url, api_key=f"sk-test-{n}",
              capabilities=CAPS, prices=prices, output_limit=5000)
        for n in table["names"]
    ]
    order: Any = Order.SCORE
    if table["sticky"]:
        order = Order.sticky([f"openai/{table['names'][-1]}"], then=Order.SCORE)
    metrics = SQLiteMetrics(tmp_path_factory.mktemp("score") / "m.sqlite")
    router = Router(routes, order=order, breaker=None, metrics=metrics, score=Score(**table["weights"]))
    kw: dict[str, Any] = {"messages": [{"role": "user", "content": "word " * table["words"]}]}
    if table["max_tokens"] is not None:
        kw["max_tokens"] = table["max_tokens"]
    said = [v.route for v in router.explain(model="g", **kw).verdicts if v.would_try]
    for name in table["names"]:
        fake.script(name, Fail(503))
    try:
        if table["mode"] == "sync":
            router.completion(model="g", **kw)
        else:
            asyncio.run(router.acompletion(model="g", **kw))
    except Exception as error:
        journey = error.journey  # type: ignore[attr-defined]
    else:
        raise AssertionError("every route was scripted to fail")
    assert [a.route for a in journey.attempts] == said, (table, said)
