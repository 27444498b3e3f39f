"""The shared store: a real redis-server on a free loopback port, started by these tests.

Budgets and breaker health shared across routers and across processes, the server's clock,
and what happens when Redis is killed mid-run and comes back.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from loguru import logger

from policy_router import (
    Breaker,
    Budget,
    ConfigError,
    Health,
    ManualClock,
    OverBudgetError,
    RedisStore,
    Route,
    Router,
    StoreBack,
    StoreLost,
    StoreUnavailableError,
)
from policy_router.state.store import StoreCall
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from ._redis import RedisServer
from ._redis_worker import (
    MESSAGES,
    answered_or_refused,
    burst,
    check_one_cap,
    one_call,
    shared_policy,
    shared_routes,
)
from .conftest import KEY_PREFIX

MAX_TOKENS = 50
WORST = MAX_TOKENS  # micro-dollars: 50 output tokens at 1.00 per million


@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    yield redis_server.url
    RedisStore(redis_server.url, namespace="policy_router:shared").clear()


@pytest.fixture
def exact_fake() -> Iterator[FakeProvider]:
    """A FakeProvider whose every answer uses all of `max_tokens`: cost == reservation."""
    with FakeProvider(default=Reply(usage=(3, MAX_TOKENS))) as fake:
        yield fake


def routes(fake: FakeProvider) -> list[Route]:
    return shared_routes(fake.base_url)


def shared(url: str, fake: FakeProvider, **policies: Any) -> Router:
    """A router as another process would build it: its own RedisStore and connections."""
    return Router(routes(fake), name="shared", store=RedisStore(url), **policies)


# -- the store on its own ----------------------------------------------------------------------
def test_reserve_is_atomic_across_clients(url: str) -> None:
    stores = [RedisStore(url, namespace="policy_router:shared") for _ in range(8)]
    wins: list[str] = []

    def grab(k: int, store: RedisStore) -> None:
        wins.extend(h for i in range(5) if store.reserve("b", h := f"{k}.{i}", 10, 55))

    threads = [threading.Thread(target=grab, args=(k, s)) for k, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 5  # 5 x 10 fits in 55, a sixth does not
    state = stores[0].spend_state("b")
    assert (state.reserved, state.spent, state.holding) == (50, 0, 5)
    stores[1].settle("b", wins[0], 4, measured=True, bounded=True)
    stores[2].release("b", wins[1])
    stores[3].settle("b", wins[2], 10, measured=False, bounded=False)
    state = stores[4].spend_state("b")
    assert (state.spent, state.reserved, state.calls, state.holding) == (14, 20, 2, 2)
    assert (state.unmeasured, state.unbounded) == (1, 1)


def test_times_are_on_the_servers_clock_not_a_machines(url: str) -> None:
    # Two routers whose monotonic clocks are a million seconds apart see the same rest.
    store = RedisStore(url)
    early, late = ManualClock(100.0), ManualClock(1_000_100.0)
    a, b = store.bind("shared", early, print), store.bind("shared", late, print)
    a.update_health("r", lambda h: Health(state="open", failures=3, rest_until=100.0 + 30, rest=30))
    seen = b.health("r")
    assert seen.state == "open"
    assert seen.rest_until - late.now() == pytest.approx(30, abs=0.5)
    assert a.health("r").rest_until - early.now() == pytest.approx(30, abs=0.5)


def test_one_probe_among_many_claimants(url: str) -> None:
    breaker = Breaker(failures=1, cooldown=30)
    stores = [RedisStore(url).bind("shared", ManualClock(), print) for _ in range(6)]
    stores[0].update_health("r", lambda h: Health(state="open", failures=1, rest_until=-1.0, rest=30))
    reasons: list[str | None] = []

    def claim(store: Any) -> None:
        def change(h: Health) -> Health:
            new, reason = breaker.admit(h, 0.0)
            change.reason = reason  # type: ignore[attr-defined]
            return new

        store.update_health("r", change)
        reasons.append(change.reason)  # type: ignore[attr-defined]

    threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reasons.count(None) == 1
    assert stores[0].health("r").probing


def test_a_probe_whose_prober_died_is_given_up_after_its_lease(url: str) -> None:
    store = RedisStore(url, probe_lease=0.2).bind("shared", ManualClock(), print)
    store.update_health("r", lambda h: Health(state="half_open", failures=1, rest_until=-1.0, probing=True))
    assert store.health("r").probing
    time.sleep(0.3)
    assert not store.health("r").probing


def test_health_records_expire_on_the_server(url: str) -> None:
    store = RedisStore(url, keep_health=1).bind("shared", ManualClock(), print)
    store.update_health("r", lambda h: Health(failures=1))
    assert store.all_health() == {"r": Health(failures=1)}
    time.sleep(2.1)
    assert store.all_health() == {}


def test_bad_settings_are_refused_before_anything_connects() -> None:
    with pytest.raises(ConfigError, match="redis://, rediss://"):
        RedisStore("http://127.0.0.1:6379")
    with pytest.raises(ConfigError, match="timeout must be seconds"):
        RedisStore("redis://127.0.0.1:1/0", timeout=0)
    with pytest.raises(ConfigError, match="store must be a Store"):
        Router([Route("openai/a", group="g", capabilities={})], store=object())  # type: ignore[arg-type]


def test_the_password_never_shows(redis_server: RedisServer) -> None:
    store = RedisStore("redis://:hunter2-secret@127.0.0.1:1/0", timeout=0.1)
    assert "hunter2" not in repr(store)
    with pytest.raises(StoreUnavailableError) as caught:
        store.spend_state("b")
    assert "hunter2" not in str(caught.value)
    assert "127.0.0.1:1" in str(caught.value)


def test_no_api_key_reaches_redis(url: str, fake: FakeProvider) -> None:
    """A provider error that quotes the key is stored redacted, like every health record."""
    import redis

    router = shared(url, fake, breaker=Breaker(failures=1), budget=Budget("1.00"))
    fake.script("a", Fail(401, f"Incorrect API key provided: {KEY_PREFIX}a"))
    router.route(model="g", messages=MESSAGES, max_tokens=5)
    raw = redis.Redis.from_url(url, decode_responses=True)
    stored = {
        k: raw.hgetall(k) for k in raw.scan_iter("policy_router:shared:*") if raw.type(k) == "hash"
    }
    assert any("Incorrect API key" in str(v) for v in stored.values())
    assert KEY_PREFIX not in str(stored)


def test_a_password_and_the_wrong_one(tmp_path: Any) -> None:
    with RedisServer(password="right-pass") as server:
        ok = RedisStore(server.url)
        assert ok.reserve("b", "h1", 1, 10)
        wrong = RedisStore(server.url.replace("right-pass", "wrong-pass"))
        with pytest.raises(StoreUnavailableError, match=r"Authentication|invalid|WRONGPASS"):
            wrong.spend_state("b")


# -- routers sharing it ------------------------------------------------------------------------
def test_a_rest_taken_by_one_router_is_seen_by_anothers_next_call(
    url: str, fake: FakeProvider
) -> None:
    one = shared(url, fake, breaker=Breaker(failures=1, cooldown=60))
    other = shared(url, fake, breaker=Breaker(failures=1, cooldown=60))
    fake.script("a", Fail(503))
    assert one.route(model="g", messages=MESSAGES).route.name == "b"
    routed = other.route(model="g", messages=MESSAGES)
    assert routed.route.name == "b"
    assert "resting" in routed.journey.skips[0].reason
    assert fake.requests("a") == 1
    assert set(other.resting()) == {"a"}
    other.reset("a")
    assert one.resting() == {}


def test_healthiest_orders_by_the_shared_failure_counts(url: str, fake: FakeProvider) -> None:
    """Failures counted by one router reorder another's HEALTHIEST group, sync and async;
    the records are fetched in one call per request, before the first route is tried."""
    one = shared(url, fake, breaker=Breaker(failures=5))
    other = shared(url, fake, breaker=Breaker(failures=5), order="healthiest")
    fake.script("a", Fail(500), Fail(500))
    one.route(model="g", messages=MESSAGES)
    one.route(model="g", messages=MESSAGES)
    assert one.health()["a"].failures == 2
    assert other.route(model="g", messages=MESSAGES).route.name == "b"

    async def main() -> str:
        return (await other.aroute(model="g", messages=MESSAGES)).route.name

    assert asyncio.run(main()) == "b"
    assert fake.requests("a") == 2


def test_check_pings_the_store(url: str, fake: FakeProvider) -> None:
    """`router.check()` (and `policy-router check`) says when the shared store is down."""
    assert shared(url, fake).check() == []
    gone = Router(routes(fake), store=RedisStore("redis://127.0.0.1:1/0", timeout=0.1))
    [problem] = gone.check()
    assert problem.startswith("store: Redis at redis://127.0.0.1:1/0 is unreachable")


def test_differently_named_routers_share_nothing(url: str, fake: FakeProvider) -> None:
    one = shared(url, fake, breaker=Breaker(failures=1, cooldown=60))
    stranger = Router(routes(fake), name="other", store=RedisStore(url), breaker=Breaker())
    fake.script("a", Fail(503))
    one.route(model="g", messages=MESSAGES)
    assert stranger.resting() == {}
    RedisStore(url, namespace="policy_router:other").clear()


def test_async_calls_share_the_budget_without_blocking_the_loop(
    url: str, exact_fake: FakeProvider
) -> None:
    router = shared(url, exact_fake, budget=Budget(f"{WORST * 5 / 1e6:.6f}"))

    async def main() -> tuple[Counter[str], int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        calls = (answered_or_refused(router, MAX_TOKENS) for _ in range(12))
        results = Counter(await asyncio.gather(*calls))
        ticker.cancel()
        return results, ticks

    results, ticks = asyncio.run(main())
    assert results == {"answered": 5, "refused": 7}
    assert ticks > 12  # the loop kept turning while store steps ran on workers
    spending = router.spending()
    assert spending.spent == spending.cap and spending.reserved.micros == 0


def test_a_slow_redis_does_not_stall_the_event_loop(
    url: str, redis_server: RedisServer, exact_fake: FakeProvider
) -> None:
    """Async calls await redis.asyncio: while Redis holds every command for 0.4 s, other
    tasks on the loop keep running (a sync client would freeze the loop for all of it)."""
    import redis

    router = shared(url, exact_fake, budget=Budget("1.00"), breaker=Breaker())

    async def main() -> float:
        gaps: list[float] = []

        async def tick() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.05)
        redis.Redis.from_url(url).execute_command("CLIENT", "PAUSE", 400, "ALL")
        started = time.perf_counter()
        await router.acompletion(model="openai/a", messages=MESSAGES, max_tokens=MAX_TOKENS)
        took = time.perf_counter() - started
        ticker.cancel()
        assert took >= 0.3  # the call did wait for Redis
        return max(gaps)

    assert asyncio.run(main()) < 0.2


def test_a_cancelled_task_leaves_nothing_reserved(url: str, fake: FakeProvider) -> None:
    router = shared(url, fake, budget=Budget("1.00"), breaker=Breaker(failures=1))
    fake.script("a", Hang(5))

    async def main() -> None:
        task = asyncio.create_task(
            router.acompletion(model="openai/a", messages=MESSAGES, max_tokens=MAX_TOKENS)
        )
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.3)  # the store step finishes on its worker

    asyncio.run(main())
    spending = router.spending()
    assert spending.reserved.micros == 0
    assert spending.calls == 1 and not spending.is_exact  # sent: charged its reservation
    assert router.health()["a"] == Health()


def test_config_store_key(url: str, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", url)
    monkeypatch.setenv("FAKE_KEY", f"{KEY_PREFIX}config")
    policy = shared_policy(fake.base_url, "shared", {"redis": "os.environ/REDIS_URL", "timeout": 0.2})
    one, other = Router.from_config(policy), Router.from_config(policy)
    fake.script("a", Fail(500))
    assert one.route(model="g", messages=MESSAGES).route.name == "openai/b"
    assert set(other.resting()) == {"openai/a"}
    monkeypatch.delenv("REDIS_URL")
    with pytest.raises(ConfigError, match="REDIS_URL is not set"):
        Router.from_config(policy)
    with pytest.warns(UserWarning, match="literal password"):
        Router.from_config({**policy, "store": {"redis": "redis://:pw@127.0.0.1:1/0"}})


# -- Redis killed mid-run --------------------------------------------------------------------
def test_killing_redis_mid_run(exact_fake: FakeProvider) -> None:
    """Budget calls fail closed while Redis is gone; calls without a budget go on with
    this process's health; everything recovers by itself when Redis returns, and the cost
    of a call that ended during the outage is written then."""
    warnings: list[str] = []
    sink = logger.add(lambda m: warnings.append(str(m)), level="WARNING")
    cap_calls = 6
    with RedisServer(persist=True) as server:
        budgeted = shared(
            server.url,
            exact_fake,
            budget=Budget(f"{WORST * cap_calls / 1e6:.6f}"),
            breaker=None,  # the budget's writes alone wait in the backlog, as counted below
        )
        told: list[object] = []
        free = Router(
            routes(exact_fake),
            name="free",
            store=RedisStore(server.url, retry_every=0.3),
            breaker=Breaker(failures=1, cooldown=60),
            observers=[lambda r: told.append(r) if isinstance(r, StoreLost | StoreBack) else None],
        )
        for _ in range(2):
            budgeted.completion(model="openai/a", messages=MESSAGES, max_tokens=MAX_TOKENS)
        exact_fake.script("a", Hang(1.0, Reply(usage=(3, MAX_TOKENS))))
        ended: list[object] = []
        in_flight = threading.Thread(
            target=lambda: ended.append(
                budgeted.route(model="openai/a", messages=MESSAGES, max_tokens=MAX_TOKENS)
            )
        )
        in_flight.start()
        time.sleep(0.3)
        server.stop()  # SIGKILL while a call holds a reservation
        in_flight.join()  # it answers during the outage: its cost waits in the backlog
        assert len(ended) == 1
        assert budgeted._life.now.store.pending_writes == 1  # type: ignore[attr-defined]

        sent = exact_fake.requests()
        with pytest.raises(OverBudgetError, match="budget store unreachable"):
            budgeted.completion(model="openai/a", messages=MESSAGES, max_tokens=MAX_TOKENS)
        assert exact_fake.requests() == sent  # refused before anything was sent
        with pytest.raises(StoreUnavailableError):
            budgeted.spending()

        exact_fake.script("a", Fail(500))
        assert free.route(model="g", messages=MESSAGES).route.name == "b"
        routed = free.route(model="g", messages=MESSAGES)  # the local view rests a
        assert "resting" in routed.journey.skips[0].reason
        outage_warnings = [w for w in warnings if "unreachable" in w]
        # One WARNING per store for the outage (two stores here), not one per call.
        assert len(outage_warnings) == 2, warnings

        server.start()  # the same data: appendonly with fsync on every write
        time.sleep(1.1)  # past retry_every
        answered = 0
        while True:
            try:
                budgeted.completion(model="openai/a", messages=MESSAGES, max_tokens=MAX_TOKENS)
                answered += 1
            except OverBudgetError as error:
                assert "could overrun" in str(error) or "spent" in str(error)
                break
        spending = budgeted.spending()
        assert spending.calls == cap_calls and spending.spent == spending.cap
        assert spending.reserved.micros == 0
        assert answered == cap_calls - 3
        assert exact_fake.requests("a") <= cap_calls + 1  # + the one that failed with 500
        assert any("answers again" in w for w in warnings)
        # Health comes back from Redis: the local rest taken during the outage is dropped.
        assert free.resting() == {}
        assert [type(r) for r in told] == [StoreLost, StoreBack]  # once each, to observers
        assert told[0].store == server.url  # type: ignore[attr-defined]
    logger.remove(sink)


# -- processes ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def processes() -> Any:
    """Worker processes forked from one that has imported litellm once."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["litellm", "policy_router", "tests._redis_worker"])
    return context


@pytest.mark.slow
def test_eight_processes_one_cap_no_overshoot(
    url: str, exact_fake: FakeProvider, processes: Any
) -> None:
    fits = 37
    cap = f"{WORST * fits / 1e6:.6f}"
    with processes.Pool(8) as pool:
        barrier = processes.Manager().Barrier(8)
        # The store gets 5 s a command: a burst of 800 calls on a busy 2-core machine timed
        # out connecting at the default 1 s (320 of 800 once), which the budget meets by
        # refusing (`check_one_cap`).
        results = pool.starmap(
            burst, [(url, exact_fake.base_url, cap, 100, MAX_TOKENS, barrier, False, 5.0)] * 8
        )
    assert sum(sum(results, Counter()).values()) == 800
    state = RedisStore(url, namespace="policy_router:shared").spend_state("budget")
    check_one_cap(results, fits, exact_fake.requests(), state, WORST)


@pytest.mark.slow
def test_a_rest_in_one_process_and_exactly_one_probe_after_it(
    url: str, fake: FakeProvider, processes: Any
) -> None:
    cooldown = 2.0
    manager = processes.Manager()
    out = manager.Queue()
    go = manager.Event()
    b = processes.Process(target=one_call, args=(url, fake.base_url, cooldown, go, out))
    b.start()
    router_a = shared(url, fake, breaker=Breaker(failures=1, cooldown=cooldown))
    fake.script("a", Fail(500))
    assert router_a.route(model="g", messages=MESSAGES).route.name == "b"
    go.set()
    seen_by_b = out.get(timeout=30)
    b.join()
    assert seen_by_b["answered"] == "b"
    assert seen_by_b["skipped"]["a"].startswith("resting")

    time.sleep(cooldown + 0.2)
    fake.script("a", Hang(1.0))  # the probe is still in flight while the others decide
    barrier = manager.Barrier(8)
    workers = [
        processes.Process(target=one_call, args=(url, fake.base_url, cooldown, barrier, out))
        for _ in range(8)
    ]
    for w in workers:
        w.start()
    seen = [out.get(timeout=30) for _ in workers]
    for w in workers:
        w.join()
    assert fake.requests("a") == 2  # the failure before, and exactly one probe
    assert sorted(s["answered"] for s in seen) == ["a"] + ["b"] * 7
    assert all("probing" in s["skipped"]["a"] for s in seen if s["answered"] == "b")


def test_writes_held_back_by_an_outage_are_tried_once_more_at_exit() -> None:
    """A process ending soon after Redis returns still writes the costs it held back."""
    with RedisServer() as server:
        store = RedisStore(server.url, retry_every=60)
        assert store.reserve("b", "h1", 10, 100)
        server.stop()
        store.settle("b", "h1", 7, measured=True, bounded=True)
        assert store.pending_writes == 1
        server.start()  # empty: nothing persisted, so only the replayed write is there
        store._link.flush_at_exit()  # what atexit calls; retry_every has not passed
        assert store.pending_writes == 0
        assert store.spend_state("b").spent == 7


def test_budget_writes_the_deadline_cut_short_are_made_on_the_next_contact(url: str) -> None:
    """A settle and a release the request's deadline cut short are handed to `defer`: kept
    by id and made once Redis is next reached (it raised AttributeError before)."""
    store = RedisStore(url, namespace=f"policy_router:defer-{time.monotonic_ns()}")
    assert store.reserve("b", "h1", 10, 100) and store.reserve("b", "h2", 20, 100)
    store.defer(StoreCall("settle", ("b", "h1", 7), {"measured": True, "bounded": True}, True))
    store.defer(StoreCall("release", ("b", "h2"), write=True))
    assert store.pending_writes == 2
    state = store.spend_state("b")  # the next contact writes them first
    assert store.pending_writes == 0
    assert (state.spent, state.reserved, state.calls, state.holding) == (7, 0, 1, 0)


def test_reservations_left_by_a_killed_process_can_be_dropped(url: str) -> None:
    """Only the reserved amount goes: what was spent stays."""
    store = RedisStore(url, namespace="policy_router:shared")
    store.reserve("b", "h1", 30, 100)
    store.settle("b", "h1", 12, measured=True, bounded=True)
    store.reserve("b", "h2", 50, 100)  # its process dies before settling
    assert store.drop_reservations("b") == 50
    state = store.spend_state("b")
    assert (state.spent, state.reserved, state.calls, state.holding) == (12, 0, 1, 0)


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("breaker", [None, {"max_cooldown": 60.0}], ids=["default", "max_cooldown"])
def test_a_huge_retry_after_rests_a_route_the_same_bound_on_every_store(
    fake: FakeProvider, url: str, kind: str, breaker: dict[str, Any] | None
) -> None:
    """`Retry-After: 999999999` rests the route, and closes its rate window, for the one
    documented bound (an hour: `RETRY_AFTER_CAP`), in memory and on Redis alike, whatever
    the breaker's `max_cooldown`; the fallback answers meanwhile."""
    import math

    from policy_router import Breaker
    from policy_router.ground.outcome import RETRY_AFTER_CAP

    from .conftest import call_as, fake_route

    rests = []
    for store in (None, RedisStore(url, namespace=f"policy_router:ra-{time.monotonic_ns()}")):
        fake.script("a", Fail(429, retry_after=999999999))
        router = Router(
            [fake_route(fake, "a", rpm=100), fake_route(fake, "b")],
            breaker=Breaker(**breaker) if breaker else Breaker(),
            **({"store": store} if store is not None else {}),
        )
        call_as(router, kind, model="g", messages=[{"role": "user", "content": "hi"}])
        rests.append((router.resting()["openai/a"], router.usage()["openai/a"].closed_for))
    for rest, closed in rests:
        assert RETRY_AFTER_CAP - 5 < rest <= RETRY_AFTER_CAP
        assert RETRY_AFTER_CAP - 5 < closed <= RETRY_AFTER_CAP
    assert math.isclose(rests[0][0], rests[1][0], abs_tol=5)
