"""Cancelled at any await, a request or a stream releases what it held at once."""

from __future__ import annotations

import asyncio

import pytest

from policy_router import Budget, Money, PriceTable, Router
from policy_router.testing import FakeProvider, Reply, Trickle

from .conftest import MESSAGES, fake_route

PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-12-01",
        "source": "test",
        "models": {"openai/a": {"input": "1", "output": "1"}},
    }
)


async def test_a_stream_cancelled_mid_way_releases_its_hold_and_slot_at_once(
    fake: FakeProvider,
) -> None:
    """`asyncio.timeout` firing while a stream trickles: the reservation is settled and the
    rate slot freed before the caller's next line, not at garbage collection."""
    fake.script("a", Trickle(Reply(" ".join(["w"] * 40)), pieces=20, gap=0.2))
    router = Router([fake_route(fake, "a", prices=PRICES, rpm=100)], budget=Budget("1.00"))
    stream = await router.acompletion(model="g", messages=MESSAGES, stream=True, max_tokens=50)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            async for _ in stream:
                pass
    await asyncio.sleep(0)  # the settle runs on this loop, without waiting for collection
    spending = router.spending()
    assert spending.reserved == Money(0) and spending.in_flight == 0
    assert router.usage()["openai/a"].in_flight == 0
    assert stream  # still referenced: nothing here relied on collection
