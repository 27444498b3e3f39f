"""A router's lifecycle: `close()` / `aclose()` and `with` / `async with`, idempotent, closing
only what the router created; any later call raises `RouterClosedError`, nothing sent."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from policy_router import (
    Breaker,
    Budget,
    PolicyRouterError,
    RedisStore,
    Router,
    RouterClosedError,
)
from policy_router.testing import FakeProvider

from ._redis import RedisServer
from .conftest import fake_route

ASK = [{"role": "user", "content": "hi"}]

LATER_CALLS: dict[str, Callable[[Router], Any]] = {
    "completion": lambda r: r.completion(model="g", messages=ASK),
    "stream": lambda r: r.completion(model="g", messages=ASK, stream=True),
    "acompletion": lambda r: asyncio.run(r.acompletion(model="g", messages=ASK)),
    "embedding": lambda r: r.embedding(model="g", input=["a"]),
    "responses": lambda r: r.responses(input="hi", model="g"),
    "batch": lambda r: r.batch_completion(model="g", messages=[ASK], progress=False),
    "explain": lambda r: r.explain(model="g", messages=ASK),
    "spending": lambda r: r.spending(),
    "health": lambda r: r.health(),
    "usage": lambda r: r.usage(),
    "resting": lambda r: r.resting(),
    "reset": lambda r: r.reset(),
    "preflight": lambda r: r.preflight(),
}


@pytest.mark.parametrize("call", LATER_CALLS.values(), ids=LATER_CALLS.keys())
def test_a_closed_router_refuses_every_call_and_sends_nothing(
    fake: FakeProvider, call: Callable[[Router], Any]
) -> None:
    with Router([fake_route(fake, "a")], budget=Budget("1", unpriced="allow")) as router:
        router.completion(model="g", messages=ASK)
    assert fake.requests() == 1
    with pytest.raises(RouterClosedError, match="router 'default' is closed"):
        call(router)
    assert fake.requests() == 1
    assert issubclass(RouterClosedError, PolicyRouterError)


def test_close_is_idempotent_and_async_with_closes(fake: FakeProvider) -> None:
    router = Router([fake_route(fake, "a")])
    router.close()
    router.close()

    async def run() -> Router:
        async with Router([fake_route(fake, "a")]) as r:
            await r.acompletion(model="g", messages=ASK)
        await r.aclose()  # again: nothing happens
        return r

    closed = asyncio.run(run())
    with pytest.raises(RouterClosedError):
        closed.completion(model="g", messages=ASK)
    assert fake.requests() == 1


def _connections(probe: redis.Redis, below: int | None = None) -> int:
    """The server's count of clients; with `below`, waits (up to 5 s) for it to drop under
    that, since the server sees a closed socket a moment after the client closed it."""
    for _ in range(500):
        count = int(probe.info("clients")["connected_clients"])
        if below is None or count < below:
            break
        time.sleep(0.01)
    return count


def _config(path: Path, url: str, fake: FakeProvider) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "store": {"redis": url, "namespace": "policy_router:lifecycle"},
                "breaker": {"failures": 2, "cooldown": 30},
                "groups": {
                    "g": {
                        "routes": [
                            {
                                "model": "openai/a",
                                "api_base": fake.base_url,
                                "api_key": "os.environ/LIFECYCLE_KEY",
                                "capabilities": {"tools": True},
                            }
                        ]
                    }
                },
            }
        )
    )
    return path


def test_only_what_the_router_created_is_closed(
    fake: FakeProvider, redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store built from the config's URL closes with the router; a store passed as
    `store=` is the caller's and stays open."""
    monkeypatch.setenv("LIFECYCLE_KEY", "sk-test-lifecycle")
    url = redis_server.url
    config = _config(tmp_path / "policy.yaml", url, fake)
    mine = RedisStore(url, namespace="policy_router:lifecycle-mine")
    given = Router([fake_route(fake, "a")], store=mine, breaker=Breaker(failures=2))
    built = Router.from_config(config)
    built.completion(model="g", messages=ASK)
    given.completion(model="g", messages=ASK)
    probe = redis.Redis.from_url(url)  # one connection of its own, counted both times
    before = _connections(probe)
    built.close()
    given.close()
    assert _connections(probe, below=before) < before  # the built store's pool let go
    probe.close()
    assert mine.ping() >= 0  # the caller's store still answers
    mine.clear()
    RedisStore(url, namespace="policy_router:lifecycle").clear()


def test_aclose_closes_the_built_stores_async_connections(
    fake: FakeProvider, redis_server: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LIFECYCLE_KEY", "sk-test-lifecycle")
    url = redis_server.url
    config = _config(tmp_path / "policy.yaml", url, fake)

    probe = redis.Redis.from_url(url)

    async def run() -> tuple[int, int]:
        async with Router.from_config(config) as router:
            await router.acompletion(model="g", messages=ASK)
            before = _connections(probe)
        return before, _connections(probe, below=before)

    before, after = asyncio.run(run())
    probe.close()
    assert after < before
    RedisStore(url, namespace="policy_router:lifecycle").clear()
