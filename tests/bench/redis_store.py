"""What the shared store costs per call: RedisStore against InMemoryStore, same router.

Run: `.venv/bin/python tests/bench/redis_store.py [calls] [rounds]` (needs redis-server on
PATH; the script starts its own on a free loopback port, as the tests do).
Each variant is a router with a budget and a breaker (every call reserves, settles and
reads or writes health), sync and async, against FakeProvider in a child process: in
memory, on one redis-server, and on a Redis Cluster of three masters (one replica each).
Wall time per sequential call and CPU time per call are the medians of interleaved rounds;
plain `litellm.(a)completion` is measured in the same run for scale. First, the round trips
a healthy call makes to Redis, counted by a connection that counts its sends, for each mix
of breaker, budget, rpm and tpm, and what they add at a 1 ms network round trip.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import litellm
from _fake import KEY, MESSAGES, bench_routes, fake_in_child

from policy_router import Breaker, Budget, InMemoryStore, RedisStore, Router
from tests._redis import BINARY, SENT, WHY_MISSING, RedisServer, counting
from tests._redis_cluster import RedisClusterServer


def routers(base: str, url: str, cluster_url: str) -> dict[str, Router]:
    routes = bench_routes(base)
    policies: dict[str, Any] = {"budget": Budget("1000000"), "breaker": Breaker()}
    return {
        "in memory": Router(routes, store=InMemoryStore(), **policies),
        "redis": Router(routes, name="bench", store=RedisStore(url), **policies),
        "cluster": Router(
            routes, name="bench", store=RedisStore(cluster_url, cluster=True), **policies
        ),
    }


MIXES = {
    "breaker": {"breaker": True},
    "breaker + budget": {"breaker": True, "budget": True},
    "breaker + budget + rpm": {"breaker": True, "budget": True, "rpm": True},
    "breaker + budget + rpm + tpm": {"breaker": True, "budget": True, "rpm": True, "tpm": True},
}


async def round_trips(base: str, url: str) -> None:
    """Sends to Redis per healthy call, sync and async, for each mix of policies."""
    print("Round trips to Redis per healthy call (a counting connection; 20 calls each):")
    print(f"  {'a call with':<30} {'sync':>5} {'async':>6}   at a 1 ms round trip")
    for label, mix in MIXES.items():
        limits = {"rpm": 10**9} if mix.get("rpm") else {}
        limits |= {"tpm": 10**12} if mix.get("tpm") else {}
        router = Router(
            bench_routes(base, **limits),
            name=f"trips-{time.monotonic_ns()}",
            store=counting(RedisStore(url)),
            breaker=Breaker() if mix.get("breaker") else None,
            budget=Budget("1000000") if mix.get("budget") else None,
        )
        kw = {"model": "g", "messages": MESSAGES, "max_tokens": 64}
        one = functools.partial(router.completion, **kw)
        await asyncio.to_thread(one)  # connects once
        SENT.clear()
        for _ in range(20):
            await asyncio.to_thread(one)
        sync = len(SENT) / 20
        await router.acompletion(**kw)
        SENT.clear()
        for _ in range(20):
            await router.acompletion(**kw)
        async_ = len(SENT) / 20
        print(f"  {label:<30} {sync:5.1f} {async_:6.1f}   +{max(sync, async_):.0f} ms a call")


async def timed(run: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    await run()
    return time.perf_counter() - wall, time.process_time() - cpu


async def main(calls: int, rounds: int) -> None:
    # One event loop for every variant: redis.asyncio and LiteLLM keep clients per loop.
    with RedisServer() as server, RedisClusterServer() as cluster, fake_in_child() as base:
        await round_trips(base, server.url)
        rs = routers(base, server.url, cluster.url)
        kw = {"model": "g", "messages": MESSAGES, "max_tokens": 64}
        plain_kw = {
            "model": "openai/a",
            "messages": MESSAGES,
            "api_base": base,
            "api_key": KEY,
            "max_retries": 0,
        }

        def sync_of(fn: Callable[[], Any]) -> Callable[[], Awaitable[None]]:
            # Sync calls run on a thread of their own: LiteLLM's sync path misbehaves when
            # called from inside a running event loop (a later burst hung, seen here).
            def loop() -> None:
                for _ in range(calls):
                    fn()

            return lambda: asyncio.to_thread(loop)

        def async_of(fn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[None]]:
            async def loop() -> None:
                for _ in range(calls):
                    await fn()

            return loop

        def burst_of(fn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[None]]:
            async def burst() -> None:
                await asyncio.gather(*(fn() for _ in range(calls)))

            return burst

        variants: dict[str, Callable[[], Awaitable[None]]] = {
            "sync  plain litellm": sync_of(lambda: litellm.completion(**plain_kw)),
            "async plain litellm": async_of(lambda: litellm.acompletion(**plain_kw)),
        }
        for name, r in rs.items():
            variants[f"sync  {name}"] = sync_of(lambda r=r: r.completion(**kw))
            variants[f"async {name}"] = async_of(lambda r=r: r.acompletion(**kw))
            variants[f"burst {name}"] = burst_of(lambda r=r: r.acompletion(**kw))
        for run in variants.values():  # warm up clients, pools and caches
            await run()
        walls: dict[str, list[float]] = {n: [] for n in variants}
        cpus: dict[str, list[float]] = {n: [] for n in variants}
        names = list(variants)
        for i in range(rounds):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                wall, cpu = await timed(variants[name])
                walls[name].append(wall / calls)
                cpus[name].append(cpu / calls)
        pinger = RedisStore(server.url)
        ping = statistics.median(pinger.ping() for _ in range(200))
    wall = {n: statistics.median(v) for n, v in walls.items()}
    cpu = {n: statistics.median(v) for n, v in cpus.items()}
    print(
        f"Per call, median of {rounds} rounds x {calls} calls (burst: {calls} concurrent); "
        f"Redis PING {ping * 1e3:.3f} ms on loopback:"
    )
    print(f"  {'variant':<22} {'wall':>10} {'cpu':>10}")
    for n in variants:
        print(f"  {n:<22} {wall[n] * 1e3:7.3f} ms {cpu[n] * 1e3:7.3f} ms")
    for store in ("redis", "cluster"):
        for mode in ("sync ", "async", "burst"):
            extra_wall = wall[f"{mode} {store}"] - wall[f"{mode} in memory"]
            extra_cpu = cpu[f"{mode} {store}"] - cpu[f"{mode} in memory"]
            ratio = wall[f"{mode} {store}"] / wall[f"{mode} in memory"]
            print(
                f"  {mode.strip():<5}: {store} adds {extra_wall * 1e3:+.3f} ms wall "
                f"({ratio:.3f}x in memory), {extra_cpu * 1e3:+.3f} ms CPU per call"
            )
    plain = wall["async plain litellm"]
    print(f"  async with Redis / plain litellm.acompletion: {wall['async redis'] / plain:.3f}x")


if __name__ == "__main__":
    if BINARY is None:
        sys.exit(WHY_MISSING)
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    asyncio.run(main(calls, int(sys.argv[2]) if len(sys.argv) > 2 else 5))
