"""The fault matrix: every fault FakeProvider scripts x route position x driver (sync,
async, stream, async stream) x breaker on/off x budget on/off, each cell checking every
promise at once; and again with breaker and budget in Redis. The cells with a breaker also
give every route rate limits, so the windows are checked against what was really sent."""

from __future__ import annotations

import uuid
from typing import Any

import litellm
import pytest

from policy_router import Breaker, Budget, Money, PriceTable, RedisStore, Router
from policy_router.ground.outcome import FaultKind
from policy_router.testing import Drop, Fail, FakeProvider, Hang, Reply

from ._redis import RedisServer
from .conftest import fake_route
from .test_router import FAULTS, NAMES, run

PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "matrix",
        "models": {f"openai/{n}": {"input": "1", "output": "2"} for n in (*NAMES, "vendor")},
    }
)
CAP = Money.parse("1.00")
# The timeout cells are the slow ones (each waits out a client timeout): marked slow.
CELLS = [pytest.param(f, marks=pytest.mark.slow) if f == "timeout" else f for f in FAULTS]


@pytest.mark.parametrize("budget", [False, True], ids=["no-budget", "budget"])
@pytest.mark.parametrize("breaker", [False, True], ids=["no-breaker", "breaker"])
@pytest.mark.parametrize("driver", ["sync", "async", "stream", "astream"])
@pytest.mark.parametrize("position", range(3), ids=NAMES)
@pytest.mark.parametrize("fault", CELLS)
def test_cell(
    fake: FakeProvider, fault: str, position: int, driver: str, breaker: bool, budget: bool
) -> None:
    """Right answer or right error; requests equal attempts; floor, cap and charges hold."""
    check_cell(fake, fault, position, driver, breaker, budget)


@pytest.mark.parametrize("driver", ["sync", "async", "stream", "astream"])
@pytest.mark.parametrize("position", range(3), ids=NAMES)
@pytest.mark.parametrize("fault", CELLS)
def test_cell_on_redis(
    fake: FakeProvider, redis_server: RedisServer, fault: str, position: int, driver: str
) -> None:
    """The same promises with breaker and budget in Redis: nothing above the store changes
    (async drivers await redis.asyncio, sync ones use the sync client)."""
    name = f"matrix-{uuid.uuid4().hex[:8]}"
    store = RedisStore(redis_server.url)
    try:
        check_cell(fake, fault, position, driver, True, True, store=store, name=name)
    finally:
        RedisStore(redis_server.url, namespace=f"policy_router:{name}").clear()


def check_cell(
    fake: FakeProvider,
    fault: str,
    position: int,
    driver: str,
    breaker: bool,
    budget: bool,
    **router_kw: Any,
) -> None:
    step, error, falls_through = FAULTS[fault]
    if fault == "cut-before-first-chunk" and driver != "stream":
        step, error = Drop(), litellm.InternalServerError
    if fault == "timeout":
        step = Hang(2)
    for name in NAMES[:position]:
        fake.script(name, Fail(503))
    fake.script(NAMES[position], step)
    for name in NAMES:
        fake.script(name, Reply("ok", usage=(20, 5)))
    # With a breaker, every route also has rate limits no cell reaches: each attempt takes
    # a slot, which must end settled (sent) or given back (not sent), never left in flight.
    limits = {"rpm": 100, "tpm": 1_000_000} if breaker else {}
    router = Router(
        [
            *(fake_route(fake, n, prices=PRICES, **limits) for n in NAMES),
            fake_route(fake, "vendor", reach="vendor", prices=PRICES, **limits),
        ],
        breaker=Breaker(failures=1) if breaker else None,
        budget=Budget(CAP) if budget else None,
        **router_kw,
    )
    kwargs: dict[str, Any] = {"on_device": True, "max_tokens": 50}
    if fault == "timeout":
        kwargs["timeout"] = 0.3
    answers = falls_through and position < 2
    if answers:
        routed, _ = run(router, driver, **kwargs)
        journey = routed.response.journey if "stream" in driver else routed.journey
        assert routed.route.name == f"openai/{NAMES[position + 1]}"
    else:
        with pytest.raises(error) as caught:
            run(router, driver, **kwargs)
        journey = caught.value.journey  # type: ignore[attr-defined]
    # Requests really sent equal the journey's attempts, route by route.
    sent = {n: fake.requests(n) for n in (*NAMES, "vendor")}
    assert sum(sent.values()) == len(journey.attempts)
    assert all(sent[n] == sum(a.route == f"openai/{n}" for a in journey.attempts) for n in sent)
    # The floor: the vendor route is named, as a floor skip, and never sent a request.
    assert sent["vendor"] == 0
    assert [s.route for s in journey.skips] == ["openai/vendor"]
    if budget:
        spending = router.spending()
        costs = [a.cost for a in journey.attempts if a.cost is not None]
        assert spending.spent <= CAP and spending.reserved == Money(0)
        assert spending.spent == sum(costs, Money(0))  # charged once, by the journey's costs
    if limits:
        windows = router.usage()
        assert {n: windows[f"openai/{n}"].requests for n in sent} == sent
        assert all(w.in_flight == 0 for w in windows.values())
        answered = [a for a in journey.attempts if a.ok]
        assert all(windows[a.route].tokens == 25 for a in answered)  # settled to the bill
    if breaker:
        kind = FaultKind(journey.attempts[position].outcome)
        resting = router.resting()
        assert (f"openai/{NAMES[position]}" in resting) == (kind.about in ("provider", "route"))
