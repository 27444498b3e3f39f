"""Spend governance: budgets over periods and scopes, all reserved at once, never passed,
kept across restarts, set live, told at thresholds. The router end to end against
FakeProvider, on each store: in memory, SQLite and Redis."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_router import (
    Budget,
    BudgetThreshold,
    ConfigError,
    InMemoryStore,
    ManualClock,
    Money,
    OverBudgetError,
    RedisStore,
    Router,
    SQLiteStore,
)
from policy_router.policies.periods import Period
from policy_router.testing import FakeProvider, Hang

from ._redis import RedisServer
from .conftest import KINDS, MESSAGES, call_as, fake_route, prices

ROOT = Path(__file__).resolve().parent.parent
PRICES = prices(a="1000", b="1000")  # $0.001 a token: a call of ~20 tokens costs ~$0.02
STORES = ["memory", "sqlite", "redis"]


@pytest.fixture
def store_of(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A maker of the named store: each call a fresh one (`again=True`: the same file or
    namespace again, as a restarted process opens it)."""
    made: list[Any] = []
    namespace = f"gov-{uuid.uuid4().hex[:8]}"

    def make(kind: str, again: bool = False) -> Any:
        if kind == "memory":
            store: Any = made[0] if again and made else InMemoryStore()
        elif kind == "sqlite":
            store = SQLiteStore(tmp_path / "state.sqlite")
        else:
            server: RedisServer = request.getfixturevalue("redis_server")
            store = RedisStore(server.url, namespace=namespace)
        made.append(store)
        return store

    yield make
    for store in made:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def router(fake: FakeProvider, store: Any, *budgets: Budget, clock: Any = None, **kw: Any) -> Router:
    return Router(
        [fake_route(fake, "a", prices=PRICES), fake_route(fake, "b", prices=PRICES)],
        budgets=list(budgets), store=store, clock=clock, breaker=None, **kw,
    )


# -- periods ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("period", "tz", "at", "start", "end"),
    [
        ("day", None, "2026-12-06T23:59:59", "2026-12-06T00:00:00", "2026-12-07T00:00:00"),
        ("week", None, "2026-12-06T12:00:00", "2026-11-30T00:00:00", "2026-12-07T00:00:00"),  # a Sunday
        ("month", None, "2026-12-31T23:00:00", "2026-12-01T00:00:00", "2027-01-01T00:00:00"),
        ("day", "Europe/Oslo", "2026-12-06T23:30:00", "2026-12-06T23:00:00", "2026-12-07T23:00:00"),
        ("day", "Europe/Oslo", "2026-03-29T12:00:00", "2026-03-28T23:00:00", "2026-03-29T22:00:00"),  # 23 h
        (3600, None, "2026-12-06T10:59:59", "2026-12-06T10:00:00", "2026-12-06T11:00:00"),
    ],
)
def test_a_period_starts_at_its_calendar_boundary(period: Any, tz: str | None, at: str, start: str, end: str) -> None:
    """Days, ISO weeks and calendar months start at midnight in their zone (a day in Oslo is
    23 hours when the clocks go forward); a fixed window is aligned to the epoch."""
    found = Period.of(period, tz)
    assert found is not None
    span = found.window(datetime.fromisoformat(at).replace(tzinfo=UTC).timestamp())
    assert span.started == datetime.fromisoformat(start).replace(tzinfo=UTC)
    assert span.resets_at == datetime.fromisoformat(end).replace(tzinfo=UTC)


@pytest.mark.parametrize("kind", KINDS)
def test_a_daily_budget_starts_again_at_midnight(fake: FakeProvider, kind: str) -> None:
    """Spending in a period starts at zero when the period starts: refused at 23:59 with
    the reset named, served again after midnight, yesterday's account kept as it was."""
    clock = ManualClock(wall=datetime(2026, 12, 6, 23, 59, 0, tzinfo=UTC).timestamp())
    r = router(fake, InMemoryStore(), Budget("0.05", period="day"), clock=clock)
    kwargs = {"model": "g", "messages": MESSAGES, "max_tokens": 5}
    with pytest.raises(OverBudgetError) as refused:
        for _ in range(20):
            call_as(r, kind, **kwargs)
    assert refused.value.scope == "all"
    assert refused.value.resets_at == datetime(2026, 12, 7, tzinfo=UTC)
    yesterday = r.spending()
    assert Money(0) < yesterday.spent <= Money.parse("0.05")
    clock.advance(61)
    call_as(r, kind, **kwargs)
    today = r.spending()
    assert today.period_start == datetime(2026, 12, 7, tzinfo=UTC) and today.calls == 1
    assert r._view._now.budgets.store.spend_state("budget@day:2026-12-06").spent == yesterday.spent.micros


def test_a_call_reserved_before_midnight_settles_in_the_day_it_was_reserved(fake: FakeProvider) -> None:
    clock = ManualClock(wall=datetime(2026, 12, 6, 23, 59, 59, tzinfo=UTC).timestamp())
    r = router(fake, InMemoryStore(), Budget("1.00", period="day"), clock=clock)
    fake.script("a", Hang(0.5))
    held = threading.Thread(target=r.completion, kwargs={"model": "g", "messages": MESSAGES, "max_tokens": 5})
    held.start()
    while r.spending().in_flight == 0:
        time.sleep(0.01)
    clock.advance(2)  # midnight passes while the call is out
    held.join()
    assert r.spending().calls == 0  # today's account: untouched
    store = r._view._now.budgets.store
    assert store.spend_state("budget@day:2026-12-06").calls == 1


# -- scopes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("store", STORES)
def test_each_scope_holds_its_own_cap_and_a_call_reserves_against_all_it_falls_under(
    fake: FakeProvider, store_of: Any, store: str
) -> None:
    """A per-user cap binds each user alone; a tag's binds every call carrying it; the
    router's binds all; a call without a user is under no per-user budget. Refused, the
    error names the tightest scope."""
    r = router(
        fake, store_of(store),
        Budget("1.00"), Budget("0.10", per="user", period="day"), Budget("0.12", tag="team:search"),
    )
    kwargs = {"model": "g", "messages": MESSAGES, "max_tokens": 5}
    served = {"u1": 0, "u2": 0}
    for user in ("u1", "u2"):
        with pytest.raises(OverBudgetError) as refused:
            for _ in range(60):
                r.completion(**kwargs, user=user)
                served[user] += 1
        assert refused.value.scope == f"user:{user}"
        assert r.spending(user=user).spent <= Money.parse("0.10")
    assert served["u1"] == served["u2"] >= 2
    r.completion(**kwargs)  # no user: the per-user budget is not asked
    with pytest.raises(OverBudgetError) as tagged:
        for _ in range(60):
            r.completion(**kwargs, metadata={"tags": ["team:search", "other"]})
    assert tagged.value.scope == "tag:team:search"
    assert r.spending(tag="team:search").spent <= Money.parse("0.12")
    assert r.spending(user="nobody").spent == Money(0)  # a scope with no spend: a zero account
    everyone = {s.scope: s for s in r.budgets()}
    assert {"all", "user:u1", "user:u2", "tag:team:search"} <= set(everyone)
    assert all(s.reserved == Money(0) and s.in_flight == 0 for s in everyone.values())
    assert sum(fake.bills()) > 0


def test_a_route_budget_skips_the_route_and_the_call_goes_on(fake: FakeProvider) -> None:
    """Once a route's budget cannot take the worst case, the route is skipped with a
    reason naming the scope and the call is served by the next route."""
    r = router(fake, InMemoryStore(), Budget("0.06", route="openai/a", period="day"), Budget("5.00", provider="openai"))
    kwargs = {"model": "g", "messages": MESSAGES, "max_tokens": 5}
    answered = [r.route(**kwargs).route.name for _ in range(8)]
    assert answered[0] == "openai/a" and answered[-1] == "openai/b"
    skipped = r.route(**kwargs).journey.skips[0]
    assert skipped.route == "openai/a" and "route:openai/a" in skipped.reason
    assert r.spending(route="openai/a").spent <= Money.parse("0.06")


@pytest.mark.parametrize("store", STORES)
def test_a_refusal_by_one_scope_holds_nothing_in_the_others(fake: FakeProvider, store_of: Any, store: str) -> None:
    """All or none: a call refused by its user's cap leaves no reservation in the router's
    or its tag's account, under concurrent calls of many users on every store."""
    r = router(
        fake, store_of(store),
        Budget("0.60"), Budget("0.08", per="user"), Budget("0.30", tag="t"),
    )
    kwargs = {"model": "g", "messages": MESSAGES, "max_tokens": 5, "metadata": {"tags": ["t"]}}

    def one(i: int) -> str:
        try:
            r.completion(**kwargs, user=f"u{i % 5}")
            return "answered"
        except OverBudgetError as error:
            return error.scope

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(one, range(40)))
    assert outcomes.count("answered") == fake.requests() >= 5
    for scope in ["all", "tag:t", *(f"user:u{i}" for i in range(5))]:
        account = r.spending(scope)
        assert account.spent <= account.cap and account.reserved == Money(0) and account.in_flight == 0


def test_budget_arguments_are_checked_naming_the_field() -> None:
    for build, said in [
        (lambda: Budget(5.0), "float"),
        (lambda: Budget("5", period="fortnight"), "period='fortnight'"),
        (lambda: Budget("5", period="day", tz="Mars/Olympus"), "tz='Mars/Olympus'"),
        (lambda: Budget("5", per="user", tag="x"), "one scope"),
        (lambda: Budget("5", warn_at=(1.5,)), "warn_at"),
        (lambda: Budget("5", per="moon"), "per='moon'"),
        (lambda: Budget("5", tz="UTC"), "needs a period"),
    ]:
        with pytest.raises(ConfigError, match=said.replace("(", r"\(")):
            build()
    with pytest.raises(ConfigError, match="names route 'nope'"):
        Router([fake_route(FakeProvider.__new__(FakeProvider), "a") if False else _route("a")], budgets=[Budget("1", route="nope")])


def _route(name: str) -> Any:
    from policy_router import Route

    return Route(f"openai/{name}", group="g", api_base="http://127.0.0.1:9/v1", api_key="k", capabilities={"tools": True})


# -- kept across restarts, shared by processes ------------------------------------------------

def test_a_sqlite_store_keeps_every_scope_across_a_restart_and_two_processes_share_it(
    fake: FakeProvider, tmp_path: Path
) -> None:
    """A router on a SQLite file, closed and opened again, finds each scope's spending;
    two processes on one file together never pass a cap."""
    path = tmp_path / "state.sqlite"
    budgets = (Budget("0.40", period="day"), Budget("0.06", per="user", period="day"))
    first = router(fake, SQLiteStore(path), *budgets)
    first.completion(model="g", messages=MESSAGES, max_tokens=5, user="u1")
    spent = first.spending(user="u1").spent
    first.close()
    again = router(fake, SQLiteStore(path), *budgets)
    assert again.spending(user="u1").spent == spent > Money(0)
    script = f"""
import sys; sys.path.insert(0, {str(ROOT)!r})
from policy_router import Budget, Router, SQLiteStore, OverBudgetError, Route
from tests.conftest import prices
p = prices(a="1000", b="1000")
r = Router([Route(f"openai/{{n}}", group="g", api_base={fake.base_url!r}, api_key="sk-test-secret-x", prices=p,
            capabilities={{"tools": True}}) for n in "ab"], store=SQLiteStore({str(path)!r}), breaker=None,
           budgets=[Budget("0.40", period="day"), Budget("0.06", per="user", period="day")])
n = 0
for i in range(30):
    try:
        r.completion(model="g", messages=[{{"role": "user", "content": "Say hello."}}], max_tokens=5, user=f"u{{i % 3}}")
        n += 1
    except OverBudgetError:
        pass
print(n)
"""
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    served = sum(int(p.communicate(timeout=180)[0].strip() or 0) for p in procs)
    assert served >= 3
    for scope in ("all", "user:u0", "user:u1", "user:u2"):
        account = again.spending(scope)
        assert account.spent <= account.cap and account.in_flight == 0


def test_a_reservation_of_a_process_that_died_is_charged_at_its_worst_case_after_its_lease(tmp_path: Path) -> None:
    """Never held forever, never released as unspent: past the lease it is settled at its
    worst case, and a late settle of it changes nothing."""
    path = tmp_path / "state.sqlite"
    dead = SQLiteStore(path, lease=0.2)
    assert dead.reserve_all((("all", 1000), ("user:u", 500)), "h1", 300) == -1
    alive = SQLiteStore(path, lease=0.2)
    assert alive.spend_state("user:u").reserved == 300
    time.sleep(0.3)
    after = alive.spend_state("user:u")
    assert (after.spent, after.reserved, after.holding, after.unmeasured) == (300, 0, 0, 1)
    dead.settle_all(("all", "user:u"), "h1", 10, measured=True, bounded=True)
    assert alive.spend_state("user:u").spent == 300
    assert alive.spend_state("all").spent == 300



@pytest.mark.parametrize("end", ["settle", "release"])
def test_a_late_settle_or_release_of_a_hold_past_its_lease_charges_its_worst_case(tmp_path: Path, end: str) -> None:
    """Writes look for holds past their lease at most once a second: a settle or release
    that comes after the lease, before any look, still charges the worst case, not what the
    late call says (a release would otherwise free money the request may have spent)."""
    slow = SQLiteStore(tmp_path / "state.sqlite", lease=0.2)
    assert slow.reserve_all((("all", 1000), ("user:u", 500)), "h1", 300) == -1  # and looked just now
    time.sleep(0.3)
    if end == "settle":
        slow.settle_all(("all", "user:u"), "h1", 10, measured=True, bounded=True)
    else:
        slow.release_all(("all", "user:u"), "h1")
    for scope in ("all", "user:u"):
        state = slow.spend_state(scope)
        assert (state.spent, state.reserved, state.holding, state.unmeasured) == (300, 0, 0, 1)


# -- set live, told at thresholds ------------------------------------------------------------

@pytest.mark.parametrize("store", ["sqlite", "redis"])
def test_a_cap_set_live_is_seen_by_every_process_within_a_second(fake: FakeProvider, store_of: Any, store: str) -> None:
    """One router raises a user's cap; another on the same store applies it within a second;
    removing it returns to the configured cap."""
    budgets = (Budget("1.00"), Budget("0.048", per="user", period="day"))
    one, two = router(fake, store_of(store), *budgets), router(fake, store_of(store, again=True), *budgets)
    kwargs = {"model": "g", "messages": MESSAGES, "max_tokens": 5, "user": "dev"}
    two.completion(**kwargs)
    with pytest.raises(OverBudgetError):
        two.completion(**kwargs)
    one.set_budget("user:dev", Budget("0.20", period="day"))
    time.sleep(1.1)
    two.completion(**kwargs)
    assert two.spending(user="dev").cap == Money.parse("0.20")
    one.set_budget("user:dev", None)
    time.sleep(1.1)
    assert two.spending(user="dev").cap == Money.parse("0.048")


def test_a_threshold_is_told_once_per_scope_and_period_across_routers(fake: FakeProvider, tmp_path: Path) -> None:
    """Crossing 30% and 50% of a key's cap emits one `BudgetThreshold` each, once across
    two routers sharing the store, never carrying a key or a prompt."""
    seen: list[BudgetThreshold] = []
    budget = Budget("0.10", key="alice", period="day", warn_at=(0.3, 0.5))
    path = tmp_path / "state.sqlite"
    routers = [router(fake, SQLiteStore(path), budget, observers=[seen.append]) for _ in range(2)]
    with pytest.raises(OverBudgetError):
        for i in range(20):
            routers[i % 2].completion(model="g", messages=MESSAGES, max_tokens=5, scope={"key": "alice"})
    told = [(e.scope, e.fraction) for e in seen if isinstance(e, BudgetThreshold)]
    assert told == [("key:alice", 0.3), ("key:alice", 0.5)]
    assert all(e.spent.micros >= e.fraction * e.cap.micros for e in seen if isinstance(e, BudgetThreshold))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    caps=st.lists(st.integers(0, 120_000), min_size=1, max_size=4),
    calls=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 60_000), st.sampled_from(["settle", "release", "lose"])), max_size=30),
)
def test_spent_never_passes_any_cap_whatever_reserves_settle_or_release(caps: list[int], calls: list[tuple[int, int, str]]) -> None:
    """The store's atomic step over generated scopes: a reservation is taken in all of its
    accounts or none, a settle never charges above what was reserved when bounded, and
    spent + reserved stays within every cap."""
    store = InMemoryStore()
    names = [f"s{i}" for i in range(len(caps))]
    for i, (first, amount, end) in enumerate(calls):
        accounts = tuple((names[j], caps[j]) for j in range(first % len(caps), len(caps)))
        refused = store.reserve_all(accounts, f"h{i}", amount)
        if refused < 0:
            if end == "settle":
                store.settle_all(tuple(a for a, _ in accounts), f"h{i}", amount // 2, measured=True, bounded=True)
            elif end == "release":
                store.release_all(tuple(a for a, _ in accounts), f"h{i}")
        else:
            assert all(store.spend_state(a).holding == 0 or (a, f"h{i}") not in store._holds for a, _ in accounts)
        for name, cap in zip(names, caps, strict=True):
            state = store.spend_state(name)
            assert state.spent + state.reserved <= cap


def test_asyncio_calls_across_scopes_hold_every_cap(fake: FakeProvider) -> None:
    r = router(fake, InMemoryStore(), Budget("0.30"), Budget("0.08", per="user"))

    async def main() -> list[bool]:
        async def one(i: int) -> bool:
            try:
                await r.acompletion(model="g", messages=MESSAGES, max_tokens=5, user=f"u{i % 3}")
                return True
            except OverBudgetError:
                return False

        return await asyncio.gather(*(one(i) for i in range(30)))

    outcomes = asyncio.run(main())
    assert sum(outcomes) == fake.requests()
    for scope in ("all", "user:u0", "user:u1", "user:u2"):
        account = r.spending(scope)
        assert account.spent <= account.cap and account.in_flight == 0
    assert Decimal(str(r.spending().spent.amount)) > 0


def test_resets_at_is_when_the_tightest_scope_resets(fake: FakeProvider) -> None:
    clock = ManualClock(wall=datetime(2026, 12, 9, 10, tzinfo=UTC).timestamp())  # a Wednesday
    r = router(fake, InMemoryStore(), Budget("1.00", period="month"), Budget("0.03", per="user", period="week"), clock=clock)
    with pytest.raises(OverBudgetError) as refused:
        for _ in range(10):
            r.completion(model="g", messages=MESSAGES, max_tokens=5, user="u")
    assert refused.value.scope == "user:u"
    assert refused.value.resets_at == datetime(2026, 12, 14, tzinfo=UTC) == datetime(2026, 12, 9, tzinfo=UTC) + timedelta(days=5)
