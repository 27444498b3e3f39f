"""What a call leaves behind is freed when the call ends, by reference counting, as it is
when LiteLLM is called without the router: never kept for the cyclic collector.

The router hands LiteLLM a `logger_fn` of its own (the wire's `saw`) that LiteLLM keeps in
the call's details; had the router kept those details in turn, every call's LiteLLM state
(the request, the answer, its logging) would sit in a reference cycle until the collector
came by: memory held for no one, and in a server twice the collector's passes."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from policy_router import Router
from policy_router.ground.outcome import Wire
from policy_router.testing import FakeProvider

from .conftest import KEY_PREFIX, MESSAGES, fake_route

CALLS = 8
ROUTE = "freed"


def _details_held() -> int:
    """LiteLLM call details of this module's route (dicts that carry a router wire's
    `logger_fn` and the route's key) still alive: other tests' calls are not counted,
    even one a thread of theirs finishes meanwhile."""
    return sum(
        1 for o in gc.get_objects()
        if isinstance(o, dict) and o.get("api_key") == f"{KEY_PREFIX}{ROUTE}"
        and isinstance(getattr(o.get("logger_fn"), "__self__", None), Wire)
    )


@pytest.fixture
def no_collector() -> Iterator[int]:
    """The collector off for the test; the call details alive before it (earlier tests'
    that something still holds) given as its baseline."""
    gc.collect()
    gc.disable()
    try:
        yield _details_held()
    finally:
        gc.enable()


@pytest.mark.parametrize("mode", ["sync", "async", "astream"])
def test_a_calls_litellm_details_are_freed_when_it_ends_not_by_the_collector(
    fake: FakeProvider, no_collector: int, mode: str
) -> None:
    router = Router([fake_route(fake, ROUTE)])
    if mode == "sync":
        for _ in range(CALLS):
            router.completion(model="g", messages=MESSAGES)
    else:
        async def calls() -> None:
            for _ in range(CALLS):
                answer = await router.acompletion(model="g", messages=MESSAGES, stream=mode == "astream")
                if mode == "astream":
                    assert "".join([c.choices[0].delta.content or "" async for c in answer])

        asyncio.run(calls())
    assert fake.requests(ROUTE) == CALLS
    # LiteLLM's own logging may still hold the last call or two while it finishes; what a
    # cycle would hold grows with every call.
    assert _details_held() - no_collector < CALLS / 2
