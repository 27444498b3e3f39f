"""Round trips to Redis per call: two for a healthy call, whatever the policies.

A counting connection counts each time redis-py sends to the server (one send is one round
trip: a pipeline or a script goes in one). Every combination of breaker, budget, rpm and
tpm, sync and async, regular and streamed, is measured after a warm-up call (which
connects and says hello), over calls to a healthy route.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import litellm
import pytest

from policy_router import Breaker, Budget, PriceTable, RedisStore, Route, Router
from policy_router.testing import Fail, FakeProvider, Reply

from ._redis import SENT, RedisServer, counting
from ._redis_worker import MESSAGES, TABLE
from .conftest import KEY_PREFIX


def counted(url: str, **kw: Any) -> RedisStore:
    """A store whose every connection, sync or async, counts what it sends. Its commands
    wait up to 30 s: a healthy store's round trips are counted, and a busy machine's Redis
    answering past the default 1 s would send the settlement the outage's way (one write
    more, on the next call)."""
    kw.setdefault("timeout", 30.0)
    return counting(RedisStore(url, namespace=f"policy_router:trips-{time.monotonic_ns()}", **kw))


POLICIES = [
    dict(zip(("breaker", "budget", "rpm", "tpm"), flags, strict=True))
    for flags in itertools.product([False, True], repeat=4)
    if any(flags)
]


def router_for(url: str, fake: FakeProvider, policy: dict[str, bool]) -> Router:
    route = Route(
        "openai/a",
        group="g",
        api_base=fake.base_url,
        api_key=f"{KEY_PREFIX}a",
        prices=PriceTable.from_dict(TABLE),
        capabilities={"streaming": True},
        rpm=1000 if policy["rpm"] else None,
        tpm=10_000_000 if policy["tpm"] else None,
    )
    return Router(
        [route],
        store=counted(url),
        breaker=Breaker() if policy["breaker"] else None,
        budget=Budget("100") if policy["budget"] else None,
    )


@pytest.fixture
def server(redis_server: RedisServer) -> Iterator[str]:
    yield redis_server.url


def per_call_sync(router: Router, stream: bool, calls: int = 3) -> float:
    def one() -> None:
        if stream:
            for _ in router.completion(model="g", messages=MESSAGES, max_tokens=20, stream=True):
                pass
        else:
            router.completion(model="g", messages=MESSAGES, max_tokens=20)

    one()  # connects (and says hello) once
    SENT.clear()
    for _ in range(calls):
        one()
    return len(SENT) / calls


def per_call_async(router: Router, stream: bool, calls: int = 3) -> float:
    async def one() -> None:
        if stream:
            async for _ in await router.acompletion(
                model="g", messages=MESSAGES, max_tokens=20, stream=True
            ):
                pass
        else:
            await router.acompletion(model="g", messages=MESSAGES, max_tokens=20)

    async def main() -> float:
        await one()
        SENT.clear()
        for _ in range(calls):
            await one()
        return len(SENT) / calls

    return asyncio.run(main())


@pytest.mark.parametrize("stream", [False, True], ids=["regular", "streamed"])
@pytest.mark.parametrize("twin", ["sync", "async"])
@pytest.mark.parametrize(
    "policy", POLICIES, ids=lambda p: "+".join(k for k, v in p.items() if v)
)
def test_a_healthy_call_takes_two_round_trips(
    server: str, fake: FakeProvider, policy: dict[str, bool], twin: str, stream: bool
) -> None:
    router = router_for(server, fake, policy)
    measure = per_call_sync if twin == "sync" else per_call_async
    assert measure(router, stream) == 2, SENT
    assert fake.requests() == 4  # and every call reached the provider once
    if policy["budget"]:
        spending = router.spending()
        assert spending.calls == 4 and spending.reserved.micros == 0


def test_a_route_that_recovers_takes_one_more_to_clear_its_record(
    server: str, fake: FakeProvider
) -> None:
    """A closed route with a failure on its record: the answer clears it (one versioned
    write more); the next healthy call is back to two."""
    router = router_for(server, fake, {"breaker": True, "budget": True, "rpm": True, "tpm": False})
    per_call_sync(router, stream=False, calls=1)
    fake.script("a", Fail(500), Reply("ok"))
    with pytest.raises(litellm.InternalServerError):
        router.completion(model="g", messages=MESSAGES, max_tokens=20)
    assert router.health()["openai/a"].failures == 1
    SENT.clear()
    router.completion(model="g", messages=MESSAGES, max_tokens=20)
    assert len(SENT) == 4, SENT  # admission, settlement, the record read again and cleared
    assert router.health()["openai/a"].failures == 0
    assert per_call_sync(router, stream=False) == 2
