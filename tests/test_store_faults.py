"""The shared store under the faults a network really has: a reply lost after Redis ran the
command, a slow Redis, a hung Redis; every write takes effect exactly once, the deadline
bounds waits on the store, and a dropped stream gives back its connection."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_router import (
    Breaker,
    Budget,
    DeadlineExceededError,
    Money,
    MonotonicClock,
    OverBudgetError,
    PriceTable,
    RateLimitedError,
    RedisStore,
    Route,
    Router,
    Skip,
    StoreUnavailableError,
)
from policy_router.core.gate import Gate, Send
from policy_router.ground.money import Usage
from policy_router.ground.outcome import Fault, FaultKind
from policy_router.policies.bounds import RequestFacts
from policy_router.policies.breaker import HealthBook
from policy_router.policies.budget import Ledger
from policy_router.policies.candidate import Candidate
from policy_router.policies.capabilities import resolve
from policy_router.state.store import perform
from policy_router.testing import FakeProvider, Reply

from ._proxy import FaultProxy
from ._redis import RedisServer
from .conftest import KEY_PREFIX, KINDS, MESSAGES, call_as

TABLE = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "tests",
        "models": {"openai/a": {"input": "1", "output": "200"}},
    }
)
RESERVE, SETTLE, RELEASE = (
    b"policy_router: reserve",
    b"policy_router: settle",
    b"policy_router: release",
)
# A router's call is admitted in one script and settled in another (state/redis/admission.py).
ADMIT, CONCLUDE = b"policy_router: admit", b"policy_router: conclude"


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[FaultProxy]:
    with FaultProxy(redis_server.port) as p:
        yield p


def router_through(
    url: str, fake: FakeProvider, *, timeout: float = 1.0, **policies: Any
) -> tuple[Router, RedisStore]:
    store = RedisStore(
        url,
        namespace=f"policy_router:faults-{time.monotonic_ns()}",
        timeout=timeout,
        retry_every=0.05,
    )
    route = Route(
        "openai/a",
        group="g",
        api_base=fake.base_url,
        api_key=f"{KEY_PREFIX}a",
        prices=TABLE,
        capabilities={"streaming": True},
    )
    policies.setdefault("budget", Budget("1.00"))
    policies.setdefault("breaker", None)  # the settle's writes alone, as these tests count them
    return Router([route], store=store, **policies), store


def account(url: str, store: RedisStore) -> dict[str, int]:
    raw = redis.Redis.from_url(url, decode_responses=True)
    values = raw.hgetall(f"{store.namespace}:budget:budget")
    return {k: int(v) for k, v in values.items()}


def test_a_reservation_whose_reply_is_lost_is_released(
    fake: FakeProvider, proxy: FaultProxy, redis_server: RedisServer
) -> None:
    """Redis runs the admission (its reservation) and its reply is lost (twice, so the
    client's one retry on a broken connection loses it too): the call is refused, nothing
    sent, and once Redis is reached again nothing stays reserved."""
    router, store = router_through(proxy.url, fake)
    proxy.lose(ADMIT, times=2)
    with pytest.raises(OverBudgetError, match="budget store unreachable"):
        router.completion(model="g", messages=MESSAGES, max_tokens=50)
    assert proxy.lost == 2 and fake.requests() == 0
    time.sleep(0.06)  # past retry_every
    spending = router.spending()  # the next contact resolves the unknown reservation first
    assert spending.reserved.micros == 0 and spending.in_flight == 0
    assert account(redis_server.url, store).get("reserved", 0) == 0


def test_a_lost_reply_once_is_retried_safely_and_the_call_goes_ahead(
    fake: FakeProvider, proxy: FaultProxy
) -> None:
    """One lost reply: the client's retry on a new connection re-runs the admission by the
    same ids, which Redis holds once, and the settlement, which it applies once; the call
    is answered and charged once."""
    router, _ = router_through(proxy.url, fake)
    proxy.lose(ADMIT, times=1)
    proxy.lose(CONCLUDE, times=1)
    routed = router.route(model="g", messages=MESSAGES, max_tokens=50)
    assert proxy.lost == 2 and routed.attempts == 1
    spending = router.spending()
    assert (spending.calls, spending.reserved.micros) == (1, 0)
    assert spending.spent == routed.cost


def test_a_settle_whose_reply_is_lost_is_applied_once(
    fake: FakeProvider, proxy: FaultProxy, redis_server: RedisServer
) -> None:
    """The settlement ran, its reply was lost twice, the backlog replays its settle: spent
    counts the bill once, reserved returns to zero, never below (which would free room
    under the cap)."""
    router, store = router_through(proxy.url, fake)
    proxy.lose(CONCLUDE, times=2)
    routed = router.route(model="g", messages=MESSAGES, max_tokens=50)
    assert proxy.lost == 2 and store.pending_writes == 1
    time.sleep(0.06)
    spending = router.spending()
    assert store.pending_writes == 0
    assert (spending.calls, spending.reserved.micros) == (1, 0)
    assert spending.spent == routed.cost
    raw = account(redis_server.url, store)
    assert (raw["spent"], raw["reserved"], raw["calls"]) == (routed.cost.micros, 0, 1)


def test_a_slow_redis_does_not_reserve_twice(fake: FakeProvider, redis_server: RedisServer) -> None:
    """Redis busy 1.5 s against a 1 s timeout: the reserve times out (it is not re-sent),
    runs when Redis wakes, and is released by id; an answered call then leaves nothing."""
    router, _ = router_through(redis_server.url, fake)
    sleeper = threading.Thread(
        target=lambda: redis.Redis.from_url(redis_server.url).execute_command("DEBUG", "SLEEP", 1.5)
    )
    sleeper.start()
    time.sleep(0.1)
    started = time.monotonic()
    with pytest.raises(OverBudgetError, match="budget store unreachable"):
        router.completion(model="g", messages=MESSAGES, max_tokens=50)
    assert 0.9 < time.monotonic() - started < 1.4  # one timeout, not two
    sleeper.join()
    time.sleep(0.06)
    router.route(model="g", messages=MESSAGES, max_tokens=50)
    spending = router.spending()
    assert (spending.calls, spending.reserved.micros, spending.in_flight) == (1, 0, 0)


def test_the_store_timeout_is_the_longest_a_store_call_waits(
    fake: FakeProvider, proxy: FaultProxy
) -> None:
    """With timeout=0.5 and a hung Redis, the refusal comes after ~0.5 s, not twice that."""
    router, _ = router_through(proxy.url, fake, timeout=0.5)
    router.spending()  # a pooled connection exists
    proxy.hang()
    started = time.monotonic()
    with pytest.raises(OverBudgetError):
        router.completion(model="g", messages=MESSAGES, max_tokens=50)
    assert time.monotonic() - started < 0.8
    proxy.heal()


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_hung_redis_does_not_override_the_deadline(
    fake: FakeProvider, proxy: FaultProxy, driver: str
) -> None:
    """Redis hangs, deadline 0.3 s: the call ends at the deadline with
    DeadlineExceededError, nothing sent; the reservation it may have made is released."""
    router, _ = router_through(
        proxy.url, fake, timeout=2.0, breaker=Breaker(failures=1), deadline=0.3
    )
    router.spending()
    proxy.hang()
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        if driver == "sync":
            router.completion(model="g", messages=MESSAGES, max_tokens=50)
        else:
            asyncio.run(router.acompletion(model="g", messages=MESSAGES, max_tokens=50))
    assert time.monotonic() - started < 0.6
    assert fake.requests() == 0
    proxy.heal()
    time.sleep(2.2)  # the hung calls time out and the link tries again
    spending = router.spending()
    assert spending.reserved.micros == 0 and spending.in_flight == 0
    assert not router.health()["openai/a"].probing


def test_dropped_sync_streams_give_back_their_connections(
    fake: FakeProvider, redis_server: RedisServer
) -> None:
    """150 budgeted sync streams, each read for one chunk and dropped without close():
    every one is answered (LiteLLM's pool holds 100 connections), and nothing stays held."""
    fake.script("a", *[Reply(" ".join(["word"] * 400))] * 150)
    router, _ = router_through(redis_server.url, fake, budget=Budget("100.00"))
    done = threading.Event()

    def read_and_drop() -> None:
        for _ in range(150):
            stream = router.completion(model="g", messages=MESSAGES, max_tokens=500, stream=True)
            next(stream)
            del stream
            pass  # refcounting drops it at once
        done.set()

    worker = threading.Thread(target=read_and_drop, daemon=True)
    worker.start()
    assert done.wait(60), "a dropped stream kept its connection: the pool ran dry"
    spending = router.spending()
    assert spending.calls == 150 and spending.reserved.micros == 0


def test_dropped_async_streams_give_back_their_connections(
    fake: FakeProvider, redis_server: RedisServer
) -> None:
    """The same with async streams dropped without aclose(): the connection is released
    on the event loop, and the money settled."""
    fake.script("a", *[Reply(" ".join(["word"] * 400))] * 150)
    router, _ = router_through(redis_server.url, fake, budget=Budget("100.00"))

    async def main() -> None:
        for _ in range(150):
            stream = await router.acompletion(
                model="g", messages=MESSAGES, max_tokens=500, stream=True
            )
            await stream.__anext__()
            del stream
            pass  # refcounting drops it at once
            await asyncio.sleep(0)
        await asyncio.sleep(0.1)

    asyncio.run(asyncio.wait_for(main(), 60))
    spending = router.spending()
    assert spending.calls == 150 and spending.reserved.micros == 0


# -- random faults, then recovery ---------------------------------------------------------------
FAULTS = st.sampled_from(
    [
        "none",
        "none",
        "lose reserve",
        "lose reserve twice",
        "lose settle",
        "lose settle twice",
        "lose release twice",
        "lose health write twice",
        "lose admit",
        "lose admit twice",
        "lose conclude",
        "lose conclude twice",
        "slow",
        "restart",
    ]
)


@pytest.mark.slow
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(FAULTS, st.sampled_from(["answered", "failed", "refused"]), st.booleans()),
        max_size=12,
    )
)
def test_every_write_takes_effect_once_whatever_is_lost(
    persistent: tuple[RedisServer, FaultProxy], ops: list[tuple[str, str, bool]]
) -> None:
    """Reserve, settle, release and health writes, one at a time or as one admission and
    one settlement (as a router call makes them), through a proxy that loses replies after
    Redis ran them, a Redis that answers late, and Redis restarts: once Redis is reached
    again, nothing is reserved, spent is the sum of the bills settled (each once), spent
    stays within the cap, and no probe is left claimed."""
    server, proxy = persistent
    clock = MonotonicClock()
    store = RedisStore(
        proxy.url,
        namespace=f"policy_router:prop-{time.monotonic_ns()}",
        timeout=0.3,
        retry_every=0.02,
    ).bind("prop", clock, lambda _: None)
    route = Route("openai/a", group="g", api_key="k", capabilities={"tools": True}, prices=TABLE)
    candidate = Candidate(
        route=route, capabilities=resolve(route.model, None, False, route.capabilities), price=TABLE.rows["openai/a"]
    )
    cap = 1_000_000
    ledger = Ledger(Budget(Money(cap, "USD")), store)
    health = HealthBook(Breaker(failures=1, cooldown=0.01), store, lambda _: None)
    facts = RequestFacts(prompt_tokens=50, prompt_bound=55, reply_tokens=50)
    charged = 0
    markers = {
        "reserve": RESERVE,
        "settle": SETTLE,
        "release": RELEASE,
        "health write": b"health write",
        "admit": ADMIT,
        "conclude": CONCLUDE,
    }
    gate = Gate(health, None, ledger, facts, store)
    for i, (fault, outcome, at_once) in enumerate(ops):
        proxy.heal()
        if fault.startswith("lose"):
            what = fault.removeprefix("lose ").removesuffix(" twice")
            proxy.lose(markers[what], times=2 if fault.endswith("twice") else 1)
        elif fault == "slow":
            proxy.delay(0.4)
        elif fault == "restart":
            server.stop()
            server.start()
        time.sleep(0.02)  # past the breaker's cooldown and the store's retry_every
        token = f"attempt-{i}"
        if at_once:  # as a router's call goes: one admission, one settlement
            admitted = perform(store, gate.admit(candidate, clock.now(), token))
            if isinstance(admitted, Skip):
                continue
            held = admitted.held
            assert held is not None
            if outcome == "answered":
                send = Send(candidate=candidate, started=clock.now(), held=held, token=token)
                cost = perform(store, gate.conclude(send, Usage(prompt=40, completion=50), None))
                assert cost is not None
                charged += cost.micros
                continue
        else:
            if isinstance(perform(store, health.admit("openai/a", clock.now(), token)), Skip):
                continue
            held = perform(store, ledger.admit(candidate, facts))
            if isinstance(held, Skip):
                perform(store, health.release("openai/a", token))
                continue
        if outcome == "answered":
            cost, _ = perform(store, ledger.settle(held, Usage(prompt=40, completion=50)))
            charged += cost.micros
            perform(store, health.succeeded("openai/a", token))
        else:
            perform(store, ledger.release(held))
            fault_kind = FaultKind.SERVER_ERROR if outcome == "failed" else FaultKind.BAD_REQUEST
            perform(store, health.failed("openai/a", Fault(fault_kind, 500), clock.now(), token))
    proxy.heal()
    deadline = time.monotonic() + 5
    while True:  # recovery: the next contacts write what was held back, in order
        time.sleep(0.03)
        try:
            state = store.spend_state("budget")
        except StoreUnavailableError:
            assert time.monotonic() < deadline
            continue
        if store.pending_writes == 0:
            break
    raw = redis.Redis(port=server.port, decode_responses=True)
    key = f"{store.namespace}:budget:budget"
    assert state.reserved == 0 and state.holding == 0
    assert raw.hlen(f"{key}:holds") == 0
    assert state.spent == charged <= cap
    record = raw.hgetall(f"{store.namespace}:health:openai/a")
    assert record.get("probing", "0") == "0", record


@pytest.fixture(scope="module")
def persistent() -> Iterator[tuple[RedisServer, FaultProxy]]:
    """A Redis that keeps every acknowledged write across a kill (appendfsync always),
    behind a fault proxy."""
    with RedisServer(persist=True) as server, FaultProxy(server.port) as proxy:
        yield server, proxy


@pytest.mark.parametrize("budgeted", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_a_store_outage_under_a_rate_limit_is_an_outage(
    fake: FakeProvider, kind: str, budgeted: bool
) -> None:
    """A route with an rpm limit cannot be counted while Redis is down, so nothing is sent;
    the caller is told of the outage (`StoreUnavailableError`, with the journey), not that
    the route has room again in an infinite number of seconds."""
    store = RedisStore("redis://127.0.0.1:1/0", timeout=0.2, retry_every=0.05)
    route = Route(
        "openai/a", api_base=fake.base_url, api_key=f"{KEY_PREFIX}a", prices=TABLE, rpm=10,
        capabilities={"streaming": True},
    )
    budget = Budget("1.00") if budgeted else None
    router = Router([route], store=store, budget=budget)
    with pytest.raises(StoreUnavailableError) as caught:
        call_as(router, kind, model="openai/a", messages=MESSAGES, max_tokens=5)
    assert not isinstance(caught.value, RateLimitedError)
    assert "rate window store unreachable" in str(caught.value)
    assert caught.value.journey is not None and not caught.value.journey.attempts
    assert fake.requests() == 0
