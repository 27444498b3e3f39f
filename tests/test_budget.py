"""The budget end to end: refused before sending, never overshot, charged once, exactly."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import litellm
import pytest
from hypothesis import given
from hypothesis import strategies as st
from loguru import logger

from policy_router import (
    Breaker,
    Budget,
    ConfigError,
    InMemoryStore,
    Money,
    Order,
    OverBudgetError,
    Price,
    PriceTable,
    Retry,
    Router,
)
from policy_router.ground.money import Usage
from policy_router.policies.bounds import prompt_bound
from policy_router.policies.budget import Ledger, Reservation
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from .conftest import MESSAGES, Stepped, fake_route, prices


def table(rows: dict[str, tuple[str, str]], currency: str = "USD") -> PriceTable:
    return PriceTable.from_dict(
        {
            "currency": currency,
            "as_of": "2026-11-01",
            "source": "test rates",
            "models": {m: {"input": i, "output": o} for m, (i, o) in rows.items()},
        }
    )


PRICES = table({"openai/a": ("1.00", "2.00"), "openai/b": ("3.00", "4.00")})


def test_cheapest_orders_by_this_requests_cost_and_puts_unpriced_last(fake: FakeProvider) -> None:
    """A long prompt makes the low-input model cheaper although its per-token sum is higher."""
    prices = table({"openai/cheap-out": ("3.00", "1.00"), "openai/cheap-in": ("0.50", "6.00")})
    router = Router(
        [
            fake_route(fake, "unpriced"),
            fake_route(fake, "cheap-out", prices=prices),
            fake_route(fake, "cheap-in", prices=prices),
        ],
        order=Order.CHEAPEST,
    )
    long_prompt = [{"role": "user", "content": "lorem ipsum dolor " * 1500}]
    explanation = router.explain(model="g", messages=long_prompt, max_tokens=100)
    assert [v.route for v in explanation.verdicts] == [
        "openai/cheap-in",
        "openai/cheap-out",
        "openai/unpriced",
    ]
    assert "est. $0.00" in explanation.verdicts[0].reason
    routed = router.route(model="g", messages=long_prompt, max_tokens=100)
    assert routed.route.name == "openai/cheap-in"
    short = router.route(model="g", messages=[{"role": "user", "content": "hi"}], max_tokens=400)
    assert short.route.name == "openai/cheap-out"
    assert fake.requests("unpriced") == 0


def test_cheapest_ties_keep_written_order(fake: FakeProvider) -> None:
    """Routes with equal estimates are tried in the order they were written."""
    prices = table({"openai/x": ("1", "1"), "openai/y": ("1", "1")})
    router = Router(
        [fake_route(fake, "y", prices=prices), fake_route(fake, "x", prices=prices)],
        order="cheapest",
    )
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/y"


def test_response_cost_is_priced_from_usage_by_the_routes_own_table(fake: FakeProvider) -> None:
    """A routed call carries its cost: the reported usage at the route's own rates."""
    fake.script("a", Reply("hi", usage=(1000, 500)))
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("1.00"))
    # A prompt that can carry the 1,000 tokens the provider reports (each is a byte or more).
    long = [{"role": "user", "content": "word " * 1000}]
    routed = router.route(model="g", messages=long, max_tokens=600)
    assert routed.cost == Money(1000 * 1 + 500 * 2, "USD")
    spending = router.spending()
    assert (spending.spent, spending.reserved, spending.calls) == (routed.cost, Money(0), 1)
    assert spending.is_exact and not spending.overshoot_possible


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
def test_usage_above_the_worst_case_is_charged_in_full_and_flagged(
    fake: FakeProvider, stream: bool
) -> None:
    """A provider that reports more than the request could carry (1,000 prompt tokens for a
    ten-byte prompt) billed it: the budget charges all of it, says the cap may have been
    passed, warns once naming the route, and refuses the next call before sending it."""
    fake.script("a", Reply("hi", usage=(1000, 5)), Reply("hi", usage=(1000, 5)))
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("0.000500"))
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING", filter="policy_router")
    try:
        answer = router.completion(model="g", messages=MESSAGES, max_tokens=10, stream=stream)
        if stream:
            assert "".join(c.choices[0].delta.content or "" for c in answer) == "hi"
    finally:
        logger.remove(sink)
    spending = router.spending()
    assert spending.spent == Money(1000 * 1 + 5 * 2, "USD")  # more than the cap: reported
    assert spending.overshoot_possible and "overshoot possible" in str(spending)
    assert len(lines) == 1 and "openai/a" in lines[0] and "above the" in lines[0]
    with pytest.raises(OverBudgetError, match="budget spent"):
        router.completion(model="g", messages=MESSAGES, max_tokens=10)
    assert fake.requests("a") == 1


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_stream_spend_equals_the_same_calls_plain_spend(fake: FakeProvider, driver: str) -> None:
    """Streams ask for the usage chunk, charge from it, and hide it from a caller who did not ask."""
    fake.script("a", Reply("one two three", usage=(40, 3)), Reply("one two three", usage=(40, 3)))
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("1.00"))
    plain = router.route(model="g", messages=MESSAGES, max_tokens=50)

    async def consume() -> list[Any]:
        stream = await router.acompletion(model="g", messages=MESSAGES, max_tokens=50, stream=True)
        return [c async for c in stream]

    if driver == "stream":
        chunks = list(router.completion(model="g", messages=MESSAGES, max_tokens=50, stream=True))
    else:
        chunks = asyncio.run(consume())
    assert all(getattr(c, "usage", None) is None for c in chunks)
    assert fake.bodies("a")[1]["stream_options"] == {"include_usage": True}
    spending = router.spending()
    assert spending.spent == plain.cost + plain.cost
    assert spending.calls == 2 and spending.is_exact and spending.reserved == Money(0)


def test_stream_keeps_the_usage_chunk_when_the_caller_asked(fake: FakeProvider) -> None:
    """A caller who asked for include_usage still gets the usage chunk."""
    fake.script("a", Reply("x", usage=(4, 1)))
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("1.00"))
    chunks = list(
        router.completion(
            model="g",
            messages=MESSAGES,
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage.prompt_tokens == 4
    assert router.spending().spent == Money(4 * 1 + 1 * 2)


def test_failed_call_releases_its_reservation(fake: FakeProvider) -> None:
    """A failed attempt costs nothing and holds nothing; the next route is charged."""
    fake.script("a", Fail(503))
    fake.script("b", Reply("ok", usage=(10, 10)))
    router = Router(
        [fake_route(fake, "a", prices=PRICES), fake_route(fake, "b", prices=PRICES)],
        budget=Budget("1.00"),
    )
    routed = router.route(model="g", messages=MESSAGES, max_tokens=20)
    assert [a.cost for a in routed.journey.attempts] == [None, Money(10 * 3 + 10 * 4)]
    spending = router.spending()
    assert (spending.spent, spending.reserved, spending.calls) == (Money(70), Money(0), 1)


@pytest.mark.parametrize(
    ("routes", "budget", "reason"),
    [
        ({"prices": None}, Budget("1.00"), "unpriced (no price table)"),
        (
            {"prices": table({"openai/zz": ("1", "1")})},
            Budget("1.00"),
            "unpriced (no row in table)",
        ),
        (
            {"prices": table({"openai/a": ("1", "1")}, "EUR")},
            Budget("1.00"),
            "priced in EUR; the budget is in USD",
        ),
        ({"prices": PRICES}, Budget("0.000010"), "could overrun the budget: worst case $0.00"),
    ],
)
def test_budget_refuses_before_sending(
    fake: FakeProvider, routes: dict[str, Any], budget: Budget, reason: str
) -> None:
    """Each budget refusal is an OverBudgetError naming the reason, with nothing sent."""
    router = Router([fake_route(fake, "a", **routes)], budget=budget)
    with pytest.raises(OverBudgetError, match="nothing was sent") as caught:
        router.completion(model="g", messages=MESSAGES, max_tokens=100)
    assert caught.value.journey is not None
    assert caught.value.journey.skips[0].reason.startswith(reason)
    assert fake.requests() == 0


def test_unpriced_allowed_runs_and_is_counted_unmeasured(fake: FakeProvider) -> None:
    """With unpriced='allow' an unpriced route runs, and Spending says it was not measured."""
    router = Router([fake_route(fake, "a")], budget=Budget("1.00", unpriced="allow"))
    router.completion(model="g", messages=MESSAGES)
    spending = router.spending()
    assert (spending.calls, spending.unmeasured, spending.is_exact) == (1, 1, False)
    assert spending.spent == Money(0)


def test_without_max_tokens_the_call_may_run_but_overshoot_is_flagged(fake: FakeProvider) -> None:
    """A call with no max_tokens runs when its prompt fits, and Spending says so."""
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("1.00"))
    router.completion(model="g", messages=MESSAGES)
    assert router.spending().overshoot_possible


def test_spending_needs_a_budget(fake: FakeProvider) -> None:
    """Asking a router without a budget for its spending says how to get one."""
    with pytest.raises(ConfigError, match="budget=Budget"):
        Router([fake_route(fake, "a")]).spending()


def _fits_exactly(k: int, max_tokens: int) -> tuple[Budget, int]:
    kwargs = {"messages": MESSAGES, "max_tokens": max_tokens}
    bound = prompt_bound(kwargs)
    assert bound is not None
    worst = PRICES.rows["openai/a"].worst_case(bound, max_tokens)
    return Budget(Money(k * worst, "USD")), bound


def test_500_concurrent_async_calls_never_overshoot(fake: FakeProvider) -> None:
    """500 concurrent calls at a cap that fits K: at most K reach the provider, spent <= cap."""
    k, max_tokens = 20, 64
    budget, bound = _fits_exactly(k, max_tokens)
    # The provider bills the whole bound, so no settled call frees room for another.
    fake.script("a", *[Reply("ok", usage=(bound, max_tokens))] * k)
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=budget)

    async def one() -> str:
        try:
            await router.acompletion(model="g", messages=MESSAGES, max_tokens=max_tokens)
            return "sent"
        except OverBudgetError as error:
            assert error.journey is not None and not error.journey.attempts
            return "refused"

    async def all_of_them() -> list[str]:
        return await asyncio.gather(*(one() for _ in range(500)))

    results = asyncio.run(all_of_them())
    spending = router.spending()
    assert results.count("sent") == fake.requests("a") == k
    assert spending.spent == budget.cap and spending.reserved == Money(0)


def test_concurrent_threads_on_the_sync_api_never_overshoot(fake: FakeProvider) -> None:
    """Threads calling completion() share the cap the same way: at most K sent."""
    k, max_tokens = 8, 32
    budget, bound = _fits_exactly(k, max_tokens)
    fake.script("a", *[Reply("ok", usage=(bound, max_tokens))] * k)
    router = Router([fake_route(fake, "a", prices=PRICES)], budget=budget)

    def one(_: int) -> str:
        try:
            router.completion(model="g", messages=MESSAGES, max_tokens=max_tokens)
            return "sent"
        except OverBudgetError:
            return "refused"

    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(one, range(100)))
    assert results.count("sent") == fake.requests("a") == k
    assert router.spending().spent <= budget.cap


def test_mixed_currencies_cannot_be_ordered_by_price(fake: FakeProvider) -> None:
    """CHEAPEST across currencies is a configuration error, not a silent comparison."""
    with pytest.raises(ConfigError, match="cannot compare prices"):
        Router(
            [
                fake_route(fake, "a", prices=PRICES),
                fake_route(fake, "b", prices=table({"openai/b": ("1", "1")}, "EUR")),
            ],
            order=Order.CHEAPEST,
        )


ops = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "settle", "release"]),
        st.integers(0, 5_000),
        st.integers(0, 5_000),
    ),
    max_size=60,
)


@given(st.integers(0, 50_000), ops)
def test_ledger_never_loses_or_creates_a_micro(cap: int, steps: list[tuple[str, int, int]]) -> None:
    """Across any reserve/settle/release sequence the books balance and left stays >= 0."""
    ledger = Stepped(Ledger(Budget(Money(cap, "USD")), InMemoryStore()))
    price = Price("1", "1")
    held: list[Reservation] = []
    charged = 0
    for i, (op, amount, cost) in enumerate(steps):
        if op == "reserve":
            if ledger.store.reserve("budget", f"r{i}", amount, cap):
                held.append(Reservation(amount=amount, price=price, bounded=True, id=f"r{i}"))
        elif held:
            reservation = held.pop()
            if op == "settle":
                # A bounded call never bills more than it reserved.
                usage = Usage(prompt=min(cost, reservation.amount), completion=0)
                charged += price.cost(usage)
                ledger.settle(reservation, usage)
            else:
                ledger.release(reservation)
        spending = ledger.spending()
        assert spending.left.micros >= 0
        assert spending.spent.micros == charged
        assert spending.reserved.micros == sum(r.amount for r in held)
        assert spending.spent.micros + spending.reserved.micros <= cap


def test_litellm_globals_untouched_by_money(fake: FakeProvider) -> None:
    """Pricing and budgeting write nothing into LiteLLM's own cost map."""
    before = len(litellm.model_cost)
    Router([fake_route(fake, "a", prices=PRICES)], budget=Budget("1")).completion(
        model="g", messages=MESSAGES, max_tokens=5
    )
    assert len(litellm.model_cost) == before


@pytest.mark.parametrize("during", ["the call", "a retry's wait"])
def test_a_cancelled_async_call_gives_back_what_it_held(fake: FakeProvider, during: str) -> None:
    """Cancelled while sent: charged its reservation, as unmeasured. Cancelled before it
    was sent (waiting to retry): released. Either way nothing stays reserved, and a probe
    it held is free again."""
    router = Router(
        [fake_route(fake, "a", prices=PRICES, retry=Retry(attempts=2, backoff=5.0))],
        budget=Budget("1.00"),
        breaker=Breaker(failures=1, cooldown=0.01),
    )
    if during == "the call":
        fake.script("a", Hang(5))
    else:
        fake.script("a", Fail(503, retry_after=5))

    async def main() -> None:
        task = asyncio.create_task(router.acompletion(model="g", messages=MESSAGES, max_tokens=100))
        await asyncio.sleep(0.4)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    spending = router.spending()
    assert spending.reserved.micros == 0
    if during == "the call":
        assert (spending.calls, spending.unmeasured) == (1, 1)
        assert spending.spent > Money(0, "USD")
        assert router.health()["openai/a"].state == "closed"
    else:
        assert spending.calls == 0 and spending.spent == Money(0, "USD")
        assert not router.health()["openai/a"].probing


@pytest.mark.parametrize("strict", [False, True])
def test_a_budget_with_a_free_local_fallback_answers_from_it(fake: FakeProvider, strict: bool) -> None:
    """The recipe the money page shows: a priced vendor first, a model you serve yourself
    as the fallback, priced at zero with `PriceTable.free`. The vendor is down: the local
    model answers under the budget (strict or not), at no cost, where an unpriced local
    route was refused and the caller saw only the vendor's 503."""
    fake.script("vendor", Fail(503, "overloaded"))
    local = PriceTable.free("openai/local")
    router = Router(
        [fake_route(fake, "vendor", prices=prices(vendor="1")), fake_route(fake, "local", prices=local)],
        budget=Budget("1.00", strict=strict),
    )
    routed = router.route(model="g", messages=MESSAGES, max_tokens=20)
    assert routed.route.name == "openai/local"
    assert routed.cost is not None and routed.cost.micros == 0
    unpriced = Router(
        [fake_route(fake, "vendor", prices=prices(vendor="1")), fake_route(fake, "local")],
        budget=Budget("1.00", strict=strict),
    )
    fake.script("vendor", Fail(503, "overloaded"))
    with pytest.raises(litellm.ServiceUnavailableError):
        unpriced.completion(model="g", messages=MESSAGES, max_tokens=20)


def test_a_free_table_names_its_models() -> None:
    """Only the models named are free; naming none is refused with the fix."""
    table = PriceTable.free("openai/local", currency="EUR")
    assert table.price_for("openai/local") is not None and table.price_for("openai/other") is None
    assert table.currency == "EUR"
    with pytest.raises(ConfigError, match=r"PriceTable\.free"):
        PriceTable.free()
