"""Shared fixtures: one FakeProvider per test session, reset before each test."""

from __future__ import annotations

import os

# Before litellm is imported anywhere: never reach for the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

from collections.abc import Generator, Iterator
from typing import Any

import pytest
from loguru import logger

from policy_router import Check, LogObserver, PriceTable, Route, Skip
from policy_router.state.store import perform
from policy_router.testing import FakeProvider

from ._postgres import PostgresServer
from ._redis import BINARY, WHY_MISSING, RedisServer

# Every key the suite uses starts with this, so a test can look for any of them.
KEY_PREFIX = "sk-test-secret-"
CAPS = {"tools": True, "streaming": True}
MESSAGES = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="session")
def _fake_server() -> Iterator[FakeProvider]:
    with FakeProvider() as fake:
        yield fake


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server on a free loopback port for the whole session. A missing binary
    fails the tests that need it rather than skipping them: the dev extras ship one."""
    if BINARY is None:
        pytest.fail(WHY_MISSING)
    with RedisServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server (pgserver's binaries) on a Unix socket for the whole session."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def fake(_fake_server: FakeProvider) -> Iterator[FakeProvider]:
    """The session's FakeProvider, with scripts and counts cleared; a responder a test gives
    it is taken away after the test."""
    _fake_server.reset()
    _fake_server.responder = None
    yield _fake_server
    _fake_server.responder = None


def prices(**per_million: str) -> PriceTable:
    """A dated table in USD: each model (`a="1000"` is `openai/a`) at that rate per
    million tokens, input and output alike."""
    return PriceTable.from_dict(
        {
            "currency": "USD",
            "as_of": "2026-11-01",
            "source": "test",
            "models": {f"openai/{m}": {"input": r, "output": r} for m, r in per_million.items()},
        }
    )


def fake_route(fake: FakeProvider, name: str, **kw: Any) -> Route:
    """A route to model `name` on FakeProvider, with a key and declared capabilities."""
    kw.setdefault("capabilities", CAPS)
    kw.setdefault("group", "g")
    return Route(f"openai/{name}", api_base=fake.base_url, api_key=f"{KEY_PREFIX}{name}", **kw)


@pytest.fixture(scope="session", autouse=True)
def _no_key_in_any_log_line() -> Iterator[None]:
    """Every line the router logs during the whole suite (each skip, attempt, rest and
    recovery, with the providers' error texts) is checked for the keys the suite used."""
    lines: list[str] = []
    logger.remove()  # the test process only: no stderr echo of DEBUG lines
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG")
    logger.enable("policy_router")
    yield
    leaked = [line for line in lines if KEY_PREFIX in line or "sk-from-env" in line]
    if not lines:
        # Nothing routed in this selection of tests; make sure the sink would have seen it,
        # so the check cannot pass blind.
        LogObserver()(Skip("self-check", Check.KNOWN, "the log sink works"))
    logger.remove(sink)
    assert lines, "the log sink captured nothing: the secrets check would be blind"
    assert leaked == [], f"API keys leaked into log lines: {leaked[:3]}"


class Stepped:
    """A decision-core object (Plan, Ledger, HealthBook) whose store steps run at once
    against its store, as the sync driver runs them; everything else passes through."""

    def __init__(self, core: Any) -> None:
        self._core = core

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._core, name)
        if not callable(attr):
            return attr

        def run(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            return perform(self._core.store, result) if isinstance(result, Generator) else result

        return run


KINDS = ("sync", "async", "stream", "astream")
"""The four ways a chat call is made: what a promise about a call must hold for."""


def call_as(router: Any, kind: str, **kwargs: Any) -> Any:
    """Make one chat call the way `kind` says (`KINDS`), a stream read to its end; the
    response, or the stream's chunks. Raises what the call raises."""
    import asyncio

    if kind == "sync":
        return router.completion(**kwargs)
    if kind == "stream":
        return list(router.completion(stream=True, **kwargs))
    if kind == "async":
        return asyncio.run(router.acompletion(**kwargs))

    async def drained() -> list[Any]:
        stream = await router.acompletion(stream=True, **kwargs)
        return [chunk async for chunk in stream]

    return asyncio.run(drained())
