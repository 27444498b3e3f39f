"""The express lane under budgets: the call's worst case held before it is sent, as the
plan holds it.

A budgeted call on the lane is reserved against every account it falls under in the store
operation the plan's gate uses, sent, and settled in one more; a refusal, a failure, a
cancellation or an answer LiteLLM made itself is the plan's, with what the lane holds. The
lane is compared with the plan it stands in for: the same calls, with the lane switched
off, give the same answers, journeys, health, records, requests received and accounts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policy_router import Breaker, Budget, OverBudgetError, Router
from policy_router.drive.express import Lane
from policy_router.state.sqlite import SQLiteStore
from policy_router.testing import FakeProvider, Hang, Reply

from .conftest import MESSAGES, fake_route, prices
from .test_express import KEYWORDS, fault_scripts, same_on_lane_and_plan

BUDGETS = {
    "router": lambda cap, strict: [Budget(cap, strict=strict)],
    "per user": lambda cap, strict: [Budget(cap, per="user", strict=strict)],
    "user and tag": lambda cap, strict: [
        Budget(cap, user="u1", strict=strict), Budget(cap, tag="t", strict=strict)
    ],
    "route": lambda cap, strict: [Budget(cap, route="openai/x0", strict=strict)],
}

CALLS = st.sampled_from([
    {},
    {"max_tokens": 5},
    {"max_tokens": 5, "user": "u1"},
    {"max_tokens": 5, "user": "u2", "metadata": {"tags": ["t"]}},
    {"max_tokens": 40, "metadata": {"tags": ["t"]}},
])


def _spent_within_caps(budgets: list[Any]) -> None:
    for account in budgets:
        assert account.spent.micros <= account.cap.micros or account.overshoot_possible
        assert account.in_flight == 0 and account.reserved.micros == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fault_scripts(3, 2),
    st.integers(1, 4),
    st.sampled_from(sorted(BUDGETS)),
    st.sampled_from(["0.02", "0.06", "1"]),
    st.booleans(),
    CALLS,
    st.sampled_from(["memory", "sqlite", "sqlite, settled later"]),
    st.booleans(),
)
@example([["ok"]], 4, "router", "0.06", False, {"max_tokens": 5}, "memory", False)  # runs out
@example([["drop", "ok"], ["ok"]], 3, "per user", "1", False, {"max_tokens": 5, "user": "u1"}, "sqlite", True)
@example([["500"], ["ok"]], 2, "route", "0.06", True, {"max_tokens": 5}, "sqlite", False)
@example([["ok"]], 2, "router", "1", True, {}, "memory", True)  # strict, no reply cap: refused
@example([["500", "ok"], ["ok"]], 4, "router", "0.06", False, {"max_tokens": 5}, "sqlite, settled later", True)
def test_a_budgeted_call_gives_on_the_lane_what_it_gives_in_the_plan(
    fake: FakeProvider,
    tmp_path_factory: pytest.TempPathFactory,
    scripts: list[list[str]],
    calls: int,
    kind: str,
    cap: str,
    strict: bool,
    kwargs: dict[str, Any],
    store: str,
    use_async: bool,
) -> None:
    """Random fault scripts, budgets of every scope (the router's, per user, a user's and
    a tag's, a route's), caps that run out mid-run, strict or not, calls with and without
    a reply cap, the in-process and the SQLite store (settling each call at once, or with
    the next transaction as the server's does), sync and async: with the lane and without
    it, the same answers, journeys, health, records told, requests received and accounts;
    no account passes its cap, and nothing is left reserved."""

    def more() -> dict[str, Any]:
        budgets = BUDGETS[kind](cap, strict)
        if store == "memory":
            return {"budgets": budgets}
        # Settled later: 5 s, so every settlement of an async run waits for the next call's
        # reservation or the accounts' reading, never for the timer.
        within = 5.0 if store == "sqlite, settled later" else 0.0
        path = tmp_path_factory.mktemp("lane") / "state.sqlite"
        return {"budgets": budgets, "store": SQLiteStore(path, settle_within=within)}

    taken: list[str] = []
    fast = same_on_lane_and_plan(fake, scripts, calls, True, True, use_async, kwargs, taken=taken, more=more)
    assert len(taken) == calls
    _spent_within_caps(fast["budgets"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    KEYWORDS,
    fault_scripts(2, 2),
    st.sampled_from(sorted(BUDGETS)),
    st.booleans(),
)
def test_any_keyword_gives_on_a_budgeted_lane_what_it_gives_in_the_plan(
    fake: FakeProvider,
    kwargs: dict[str, Any],
    scripts: list[list[str]],
    kind: str,
    use_async: bool,
) -> None:
    """Random keywords from LiteLLM's whole space and keywords nobody listed (a reply cap
    or none, `user`, `metadata`, a mock, LiteLLM's cache), under a budget of each scope:
    the budgeted lane gives what the plan gives, and no account passes its cap or keeps a
    reservation."""
    fast = same_on_lane_and_plan(
        fake, scripts, 2, True, True, use_async, kwargs, more=lambda: {"budgets": BUDGETS[kind]("0.06", False)}
    )
    _spent_within_caps(fast["budgets"])


def test_a_budgeted_answer_on_the_lane_is_charged_once_and_recorded(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common budgeted call is answered on the lane: its usage charged to the budget,
    the attempt's cost what was charged, nothing left reserved."""
    kept: list[bool] = []
    real = Lane._answered

    def spied(self: Lane, *args: Any) -> Any:
        routed = real(self, *args)
        kept.append(routed is not None)
        return routed

    monkeypatch.setattr(Lane, "_answered", spied)
    fake.script("a", Reply("ok", usage=(1000, 500)))
    router = Router(
        [fake_route(fake, "a", prices=prices(a="1000"))], breaker=Breaker(), budget=Budget("5")
    )
    routed = router.route(model="g", messages=MESSAGES, max_tokens=600)
    assert kept == [True]
    (attempt,) = routed.journey.attempts
    assert attempt.cost is not None and attempt.cost.micros == 1_500_000
    spending = router.spending()
    assert spending.spent == attempt.cost and spending.calls == 1
    assert spending.reserved.micros == 0 and spending.in_flight == 0 and spending.is_exact


def test_the_lane_refuses_what_the_budget_cannot_hold_before_sending(fake: FakeProvider) -> None:
    """A call whose worst case does not fit is refused, with the budget's reason, and
    nothing reaches the provider."""
    router = Router(
        [fake_route(fake, "a", prices=prices(a="1000"))], breaker=Breaker(), budget=Budget("0.01")
    )
    for _ in range(2):  # the group's first plain call is read in full, the next in one pass
        with pytest.raises(OverBudgetError, match="worst case"):
            router.completion(model="g", messages=MESSAGES, max_tokens=100)
    assert fake.requests() == 0
    assert router.spending().reserved.micros == 0


def test_a_budgeted_call_cancelled_on_the_lane_is_charged_its_reservation_once(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """A task cancelled while its request is out: the provider may bill it, so its
    reservation is charged, once, and nothing stays held; the next call is answered."""
    fake.script("a", Hang(5))
    router = Router(
        [fake_route(fake, "a", prices=prices(a="1000"))],
        breaker=Breaker(), budget=Budget("5"), store=SQLiteStore(tmp_path / "s.sqlite"),
    )

    async def main() -> None:
        task = asyncio.ensure_future(router.acompletion(model="g", messages=MESSAGES, max_tokens=20))
        while fake.requests("a") == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    spending = router.spending()
    assert spending.reserved.micros == 0 and spending.in_flight == 0
    assert spending.calls == 1 and spending.unmeasured == 1 and spending.spent.micros > 0
