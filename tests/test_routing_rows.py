"""The routing rows of a long-lived router: explain changes nothing, round robin moves on
only when a request is sent, and a route can be switched off."""

from __future__ import annotations

import pytest

from policy_router import Check, NoRouteError, Order, Router
from policy_router.testing import FakeProvider

from .conftest import MESSAGES, fake_route


def _answered(router: Router) -> str:
    return router.route(model="g", messages=MESSAGES).route.name


def test_explain_does_not_move_the_round_robin_turn(fake: FakeProvider) -> None:
    """a, b, c in turn, whatever explain() was asked in between."""
    router = Router([fake_route(fake, n) for n in "abc"], order=Order.ROUND_ROBIN)
    first = [_answered(router) for _ in range(3)]
    router.explain(model="g", messages=MESSAGES)
    router.explain(model="g", messages=MESSAGES)
    assert first == ["openai/a", "openai/b", "openai/c"]
    assert _answered(router) == "openai/a"


def test_a_request_that_sends_nothing_takes_no_turn(fake: FakeProvider) -> None:
    """A request refused before sending (here: needs no route has) leaves the turn where
    it was."""
    router = Router([fake_route(fake, n) for n in "ab"], order=Order.ROUND_ROBIN)
    assert _answered(router) == "openai/a"
    with pytest.raises(NoRouteError):
        router.completion(model="g", messages=MESSAGES, needs=["thinking"])
    assert _answered(router) == "openai/b"


def test_a_disabled_route_is_skipped_with_disabled(fake: FakeProvider) -> None:
    """`Route(enabled=False)` and `enabled: false` in a policy file: never sent, said so."""
    router = Router([fake_route(fake, "a", enabled=False), fake_route(fake, "b")])
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b" and fake.requests("a") == 0
    (skip,) = routed.journey.skips
    assert (skip.route, skip.check, skip.reason) == ("openai/a", Check.ENABLED, "disabled (enabled=False on the route)")
    assert "enabled" not in fake.bodies("b")[0]
    config = {"groups": {"g": {"routes": [
        {"model": "openai/a", "api_base": fake.base_url, "api_key": "k", "enabled": False,
         "capabilities": {"tools": True}},
        {"model": "openai/b", "api_base": fake.base_url, "api_key": "k", "capabilities": {"tools": True}},
    ]}}}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_file = Router.from_config(config)
    assert from_file.route(model="g", messages=MESSAGES).route.name == "openai/b"
