"""RedisStore on a real Redis Cluster: three masters with a replica each, on loopback.

Every promise of the standalone store holds: one cap across processes with no overshoot,
one breaker, writes applied once. The faults are a cluster's own: the slot moved to
another master mid-run (ASK, then MOVED), a master killed mid-run and started again, a
replica taking over by a manual failover, and a master killed for good (an automatic
failover, where Redis's asynchronous replication may lose the last writes: the checks
there are the ones that still hold, on the safe side).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from policy_router import (
    Breaker,
    Budget,
    ConfigError,
    Order,
    OverBudgetError,
    RedisStore,
    Router,
)
from policy_router.ground.money import Money
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from ._redis_cluster import Node, RedisClusterServer
from ._redis_worker import MESSAGES, burst, check_one_cap, shared_policy, shared_routes
from .conftest import KEY_PREFIX

WORST = 50  # micro-dollars: 50 output tokens at 1.00 per million (prompts are free)


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterServer]:
    with RedisClusterServer() as server:
        yield server


@pytest.fixture
def faulty() -> Iterator[RedisClusterServer]:
    """A cluster of a test's own, for a test that kills or moves parts of it."""
    with RedisClusterServer() as server:
        yield server


def on(cluster: RedisClusterServer, fake: FakeProvider, name: str, **policies: Any) -> Router:
    store = RedisStore(cluster.url, cluster=True, retry_every=0.1, timeout=1.0)
    return Router(shared_routes(fake.base_url, rpm=10_000), name=name, store=store, **policies)


def keys_of(cluster: RedisClusterServer, namespace: str) -> tuple[int, int]:
    """How many keys the namespace has, and how many of them are in its hash tag's slot."""
    client = redis.cluster.RedisCluster.from_url(cluster.url, decode_responses=True)
    everything = list(client.scan_iter(match=f"{{{namespace}}}:*", count=1000))
    slot = client.keyslot(f"{{{namespace}}}")
    together = [k for k in everything if client.keyslot(k) == slot]
    client.close()
    return len(everything), len(together)


def test_a_router_on_a_cluster_keeps_its_state_in_one_slot(
    cluster: RedisClusterServer, fake: FakeProvider
) -> None:
    """Budget, breaker, rate windows, health-ranked and least-busy orders, sync, async and
    streamed, on a cluster: every call answered and billed, every key in one slot."""
    name = f"cluster-{time.monotonic_ns()}"
    router = on(
        cluster,
        fake,
        name,
        budget=Budget("1.00"),
        breaker=Breaker(),
        order={"g": Order.LEAST_BUSY},
    )
    router.completion(model="g", messages=MESSAGES, max_tokens=50)
    for _ in router.completion(model="g", messages=MESSAGES, max_tokens=50, stream=True):
        pass

    async def twice() -> None:
        await router.acompletion(model="g", messages=MESSAGES, max_tokens=50)
        async for _ in await router.acompletion(
            model="g", messages=MESSAGES, max_tokens=50, stream=True
        ):
            pass

    asyncio.run(twice())
    spending = router.spending()
    assert spending.calls == 4 == fake.requests()
    assert spending.reserved.micros == 0 and spending.spent.micros > 0
    assert set(router.health()) <= {"a", "b"}
    total, together = keys_of(cluster, f"policy_router:{name}")
    assert total > 0 and together == total
    router.reset()
    router.close()


@pytest.mark.slow
def test_eight_processes_one_cap_on_a_cluster(
    cluster: RedisClusterServer, fake: FakeProvider
) -> None:
    """Eight processes, 100 concurrent calls each, one cap that fits 37: every call answered
    or refused, every answer received and charged, nothing left reserved, never past the
    cap; and 37 answered, spent == cap exactly, whenever the cluster answered every call.

    On a busy machine a burst of 800 calls on one master timed out connecting or reading at
    the store's default 1 s (up to 68 of 800 here): the budget then refuses, naming the
    store unreachable. That is the promise kept (it fails closed), so the store gets 5 s,
    and the exact count is asserted for a run with no such refusal."""
    fake.script("a", *[Reply(usage=(3, 50))] * 1000)
    RedisStore(cluster.url, cluster=True, namespace="policy_router:shared").clear()
    fits = 37
    cap = f"{WORST * fits / 1e6:.6f}"
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["litellm", "policy_router", "tests._redis_worker"])
    with context.Pool(8) as pool:
        barrier = context.Manager().Barrier(8)
        results = pool.starmap(
            burst, [(cluster.url, fake.base_url, cap, 100, 50, barrier, True, 5.0)] * 8
        )
    assert sum(sum(results, Counter()).values()) == 800
    state = RedisStore(cluster.url, cluster=True, namespace="policy_router:shared").spend_state(
        "budget"
    )
    check_one_cap(results, fits, fake.requests(), state, WORST)


class Caller:
    """Calls made one after another on a thread until stopped; what each ended as."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.answered: list[Money] = []
        self.refused = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                routed = self.router.route(model="openai/a", messages=MESSAGES, max_tokens=50)
                assert routed.cost is not None
                self.answered.append(routed.cost)
            except OverBudgetError as error:
                assert "unreachable" in str(error), error
                self.refused += 1
                time.sleep(0.02)

    def __enter__(self) -> Caller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_for(self, answered: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.answered) < answered:
            assert time.monotonic() < deadline, f"only {len(self.answered)} answered"
            time.sleep(0.02)


def settled(router: Router, timeout: float = 30.0) -> Any:
    """The budget once the store answers and holds no write back."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            spending = router.spending()
            if router._life.now.store.pending_writes == 0:  # type: ignore[attr-defined]
                return spending
        except Exception:
            pass
        assert time.monotonic() < deadline, "the store never answered again"
        time.sleep(0.1)


def exactly_once(router: Router, caller: Caller, fake: FakeProvider) -> None:
    spending = settled(router)
    charged = sum(c.micros for c in caller.answered)
    assert spending.spent.micros == charged and spending.calls == len(caller.answered)
    assert spending.reserved.micros == 0 and spending.in_flight == 0
    assert fake.requests() == len(caller.answered)  # a refused call sent nothing


def mid_run(
    cluster: RedisClusterServer,
    fake: FakeProvider,
    label: str,
    fault: Callable[[str], None],
    timeout: float = 30.0,
) -> tuple[Router, Caller]:
    """A router with a budget and a breaker calling on a thread while `fault` (given the
    router's hash tag) happens to the cluster; returns once 20 more calls were answered."""
    fake.script("a", *[Hang(0.005, Reply(usage=(3, 50)))] * 5000)
    name = f"{label}-{time.monotonic_ns()}"
    router = on(cluster, fake, name, budget=Budget("10.00"), breaker=Breaker())
    with Caller(router) as caller:
        caller.wait_for(20)
        fault(f"{{policy_router:{name}}}")
        count = len(caller.answered)
        caller.wait_for(count + 20, timeout)
    return router, caller


@pytest.mark.slow
def test_the_slot_moved_to_another_master_mid_run(
    faulty: RedisClusterServer, fake: FakeProvider
) -> None:
    """The router's slot migrates key by key to another master while calls run (ASK
    during the move, MOVED after): every call is answered or refused, each charged once."""
    moved_to: list[Node] = []

    def move(tag: str) -> None:
        source = faulty.owner(tag)
        target = next(n for n in faulty.nodes if n is not source and faulty.is_master(n))
        faulty.move_slot(tag, source, target)
        moved_to.append(target)

    router, caller = mid_run(faulty, fake, "moving", move)
    assert faulty.owner(f"{{{router._life.now.store.namespace}}}") is moved_to[0]  # type: ignore[attr-defined]
    exactly_once(router, caller, fake)


@pytest.mark.slow
def test_a_master_killed_mid_run_and_started_again(
    faulty: RedisClusterServer, fake: FakeProvider
) -> None:
    """The master holding the router's slot is killed (SIGKILL) while calls run and comes
    back from its append-only file: calls are refused while it is gone (nothing sent), and
    once it answers every call is charged exactly once and nothing stays reserved."""

    def kill_and_restart(tag: str) -> None:
        master = faulty.owner(tag)
        master.kill()
        time.sleep(0.3)  # well inside the node timeout: no replica takes over
        master.start()
        faulty.wait_ok()

    router, caller = mid_run(faulty, fake, "killed", kill_and_restart)
    assert caller.refused > 0  # it was gone, and the budget failed closed
    exactly_once(router, caller, fake)


@pytest.mark.slow
def test_a_replica_takes_over_by_a_manual_failover(
    faulty: RedisClusterServer, fake: FakeProvider
) -> None:
    """`CLUSTER FAILOVER` on the replica mid-run (it catches up before it takes over): the
    client follows the new master, and every call is charged exactly once."""

    def fail_over(tag: str) -> None:
        faulty.fail_over_to(faulty.replica_of(faulty.owner(tag)), tag)

    router, caller = mid_run(faulty, fake, "failover", fail_over)
    exactly_once(router, caller, fake)


@pytest.mark.slow
def test_a_master_killed_for_good_fails_over_on_the_safe_side(
    faulty: RedisClusterServer, fake: FakeProvider
) -> None:
    """The master is killed and stays down; its replica is elected. The router recovers
    by itself, and what asynchronous replication may lose stays on the safe side: no call
    is charged twice, and spent + reserved covers every charge (a settle the replica never
    received leaves its larger reservation held)."""

    def kill(tag: str) -> None:
        master = faulty.owner(tag)
        replica = faulty.replica_of(master)
        master.kill()
        faulty.wait_for_owner(tag, replica, timeout=60)

    router, caller = mid_run(faulty, fake, "lost", kill, timeout=60)
    spending = settled(router)
    charged = sum(c.micros for c in caller.answered)
    assert spending.spent.micros <= charged <= spending.spent.micros + spending.reserved.micros
    assert fake.requests() == len(caller.answered)

def test_a_config_file_names_a_cluster(
    cluster: RedisClusterServer, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`store: {redis: ..., cluster: true}`: two routers built from one file share one
    breaker through the cluster; a cluster flag that is not a boolean is refused."""
    monkeypatch.setenv("REDIS_URL", cluster.url)
    monkeypatch.setenv("FAKE_KEY", f"{KEY_PREFIX}config")
    store = {"redis": "os.environ/REDIS_URL", "cluster": True}
    policy = shared_policy(fake.base_url, f"config-{time.monotonic_ns()}", store)
    one, other = Router.from_config(policy), Router.from_config(policy)
    assert "cluster=True" in repr(one._life.now.store)
    fake.script("a", Fail(500))
    assert one.route(model="g", messages=MESSAGES).route.name == "openai/b"
    assert set(other.resting()) == {"openai/a"}
    with pytest.raises(ConfigError, match="cluster"):
        Router.from_config({**policy, "store": {"redis": "os.environ/REDIS_URL", "cluster": "maybe"}})


def test_a_cluster_unreachable_when_the_router_is_built_fails_closed(
    fake: FakeProvider,
) -> None:
    """No node answers (the client reads the topology when it is made): the store is still
    built, a budgeted call is refused before anything is sent, a call without a budget goes
    on with this process's health, and the password appears in no message."""
    url = "redis://:cluster-secret-pw@127.0.0.1:1/0"
    told: list[object] = []
    budgeted = Router(
        shared_routes(fake.base_url),
        name=f"down-{time.monotonic_ns()}",
        store=RedisStore(url, cluster=True, retry_every=0.05, timeout=0.2),
        budget=Budget("1.00"),
        observers=[told.append],
    )
    with pytest.raises(OverBudgetError, match="budget store unreachable") as refused:
        budgeted.completion(model="g", messages=MESSAGES, max_tokens=50)
    assert fake.requests() == 0
    free = Router(
        shared_routes(fake.base_url),
        name=f"down-free-{time.monotonic_ns()}",
        store=RedisStore(url, cluster=True, retry_every=0.05, timeout=0.2),
        breaker=Breaker(),
    )
    assert free.completion(model="g", messages=MESSAGES).choices[0].message.content
    shown = " ".join([str(refused.value), repr(budgeted._life.now.store), *map(repr, told)])
    assert "cluster-secret-pw" not in shown and "StoreLost" in shown
    budgeted.close()
    free.close()


def test_a_broken_cluster_connection_is_tried_once_more_and_a_timeout_never() -> None:
    """As the standalone pool does: a dropped connection (or redis-py 8.1's race that hands
    a task a disconnected one) is tried once more, since every write is idempotent by id;
    broken again, it is an outage; a timeout is never tried again."""
    from policy_router.state.redis.link import Link

    link = Link("redis://127.0.0.1:1/0", {}, 1.0, cluster=True)

    def op_failing(*errors: BaseException) -> tuple[Any, list[int]]:
        calls: list[int] = []

        async def op(_client: Any) -> str:
            calls.append(1)
            if len(calls) <= len(errors):
                raise errors[len(calls) - 1]
            return "ok"

        return op, calls

    lost = redis.ConnectionError("Error UNKNOWN while writing to socket. Connection lost.")
    race = AttributeError("'NoneType' object has no attribute 'writelines'")
    for errors, outcome, tries in (
        ((lost,), "ok", 2),
        ((race,), "ok", 2),
        ((lost, lost), redis.ConnectionError, 2),
        ((race, race), redis.ConnectionError, 2),
        ((redis.TimeoutError("Timeout reading"),), redis.TimeoutError, 1),
        ((AttributeError("a bug of ours"),), AttributeError, 1),
    ):
        op, calls = op_failing(*errors)
        if outcome == "ok":
            assert asyncio.run(link._twice(None, op)) == "ok"
        else:
            with pytest.raises(outcome):  # type: ignore[call-overload]
                asyncio.run(link._twice(None, op))
        assert len(calls) == tries, errors
