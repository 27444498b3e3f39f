"""The log observer: its lines follow loguru's switches for the package, call by call."""

from __future__ import annotations

from loguru import logger

from policy_router import Breaker, Router
from policy_router.testing import FakeProvider

from .conftest import MESSAGES, fake_route


def test_attempt_lines_follow_enable_and_disable(fake: FakeProvider) -> None:
    """An answered call logs its attempt while `policy_router` is enabled, nothing once it is
    disabled, and again once it is enabled again (the observer never keeps a stale
    answer), on the express lane and on the plan alike."""
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker())
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG", filter="policy_router")
    try:
        seen = []
        for enabled in (True, False, True, False, True):
            (logger.enable if enabled else logger.disable)("policy_router")
            before = len(lines)
            router.completion(model="g", messages=MESSAGES)  # the express lane
            router.completion(model="g", messages=MESSAGES, deadline=30.0)  # planned
            seen.append(sum("openai/a answered in" in line for line in lines[before:]))
    finally:
        logger.remove(sink)
        logger.enable("policy_router")  # as the suite keeps it
    assert seen == [2, 0, 2, 0, 2]
