"""Round robin spreads concurrent requests (issue 38): requests planned at once, before any
is sent, each take their own turn, in this process's store and on Redis, sync and async."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import pytest

from policy_router import Breaker, Order, Router
from policy_router.state.redis.store import RedisStore
from policy_router.testing import FakeProvider, Hang, Reply

from .conftest import MESSAGES, fake_route


def _router(fake: FakeProvider, size: int, store: Any, breaker: bool) -> Router:
    return Router(
        [fake_route(fake, f"rr{i}") for i in range(size)],
        order=Order.ROUND_ROBIN,
        store=store,
        breaker=Breaker() if breaker else None,
        name=f"spread-{size}-{breaker}",
    )


@pytest.mark.parametrize("store_kind", ["memory", "redis"])
@pytest.mark.parametrize("mode", ["async", "threads"])
@pytest.mark.parametrize(("size", "breaker"), [(4, False), (4, True), (3, True)])
def test_concurrent_requests_start_on_every_route_in_turn(
    fake: FakeProvider, redis_server: Any, store_kind: str, mode: str, size: int, breaker: bool
) -> None:
    """2 x size requests at once: each route is the first route of exactly two of them."""
    store = None
    if store_kind == "redis":
        store = RedisStore(redis_server.url, namespace=f"spread:{mode}:{size}:{breaker}")
        store.clear()
    router = _router(fake, size, store, breaker)
    for i in range(size):  # slow enough that all are planned before any answers
        fake.script(f"rr{i}", *[Hang(0.2, Reply("ok"))] * 2)
    count = 2 * size
    firsts: Counter[str] = Counter()
    if mode == "async":

        async def all_at_once() -> list[Any]:
            return await asyncio.gather(
                *(router.aroute(model="g", messages=MESSAGES) for _ in range(count))
            )

        answers = asyncio.run(all_at_once())
    else:
        answers = []
        lock = threading.Lock()
        start = threading.Barrier(count)

        def one() -> None:
            start.wait()
            routed = router.route(model="g", messages=MESSAGES)
            with lock:
                answers.append(routed)

        threads = [threading.Thread(target=one) for _ in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for routed in answers:
        firsts[routed.journey.attempts[0].route] += 1
    assert firsts == Counter({f"openai/rr{i}": 2 for i in range(size)}), firsts
    router.close()
