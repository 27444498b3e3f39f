"""The routing rows of a long-lived router: explain changes nothing, round robin moves on
only when a request is sent, a route can be switched off, HEALTHIEST counts without a
breaker, sticky preference, and orderings registered by name."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from policy_router import (
    AllRestingError,
    Breaker,
    Check,
    ConfigError,
    ManualClock,
    NoRouteError,
    Order,
    OrderContext,
    PriceTable,
    Router,
    register_ordering,
    unregister_ordering,
)
from policy_router.policies.candidate import Candidate
from policy_router.testing import Cut, Fail, FakeProvider, Reply

from .conftest import MESSAGES, fake_route

PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "test",
        "models": {
            f"openai/{n}": {"input": p, "output": p}
            for n, p in (("cheap", "1"), ("mid", "2"), ("pricey", "3"), ("top", "4"))
        },
    }
)


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
    assert (skip.route, skip.check, skip.reason) == (
        "openai/a",
        Check.ENABLED,
        "disabled (enabled=False on the route)",
    )
    assert "enabled" not in fake.bodies("b")[0]
    config = {
        "groups": {
            "g": {
                "routes": [
                    {
                        "model": "openai/a",
                        "api_base": fake.base_url,
                        "api_key": "k",
                        "enabled": False,
                        "capabilities": {"tools": True},
                    },
                    {
                        "model": "openai/b",
                        "api_base": fake.base_url,
                        "api_key": "k",
                        "capabilities": {"tools": True},
                    },
                ]
            }
        }
    }
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_file = Router.from_config(config)
    assert from_file.route(model="g", messages=MESSAGES).route.name == "openai/b"


def test_healthiest_without_a_breaker_still_counts_failures(fake: FakeProvider) -> None:
    """Without a breaker, HEALTHIEST ranks by failures all the same (a breaker that counts
    and never rests): a route that failed goes to the back; nothing rests."""
    fake.script("a", Fail(503), Fail(503))
    router = Router([fake_route(fake, n) for n in "ab"], order=Order.HEALTHIEST)
    assert _answered(router) == "openai/b"  # a failed, b answered
    assert _answered(router) == "openai/b"  # a has one failure now: b first
    assert fake.requests("a") == 1 and router.resting() == {}
    assert router.health()["openai/a"].failures == 1
    assert "overloaded" in router.health()["openai/a"].last_error


def test_sticky_tries_the_given_routes_first_then_the_wrapped_ordering(
    fake: FakeProvider,
) -> None:
    router = Router(
        [fake_route(fake, n, prices=PRICES) for n in ("pricey", "cheap", "mid", "top")],
        order=Order.sticky(["openai/top", "openai/mid"], then=Order.CHEAPEST),
    )
    explained = router.explain(model="g", messages=MESSAGES, max_tokens=10)
    assert [v.route for v in explained.verdicts] == [
        "openai/top",
        "openai/mid",
        "openai/cheap",
        "openai/pricey",
    ]
    fake.script("top", Fail(503))
    assert _answered(router) == "openai/mid"


@pytest.mark.parametrize(
    ("ids", "says"),
    [
        ([], "non-empty list"),
        ("openai/a", "non-empty list"),
        (["openai/a", " "], r"ids\[1\] is blank"),
        (["openai/a", "openai/a"], r"\['openai/a'\] given more than once"),
        (["openai/nope"], r"names no route with the id \(or name\) \['openai/nope'\]"),
    ],
)
def test_sticky_refuses_blank_repeated_and_unknown_ids(
    fake: FakeProvider, ids: object, says: str
) -> None:
    with pytest.raises(ConfigError, match=says):
        Router([fake_route(fake, "a")], order=Order.sticky(ids))  # type: ignore[arg-type]


class Recording:
    """A registered ordering: as listed, noting what it is told."""

    def __init__(self) -> None:
        self.dispatched: list[str] = []
        self.results: list[tuple[str, str]] = []

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
        return list(reversed(candidates))

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        self.results.append((route, outcome))

    def on_dispatch(self, route: str) -> None:
        self.dispatched.append(route)


def test_a_registered_ordering_is_usable_by_name_and_told_of_dispatch(
    fake: FakeProvider, tmp_path: Path
) -> None:
    made: list[Recording] = []

    def factory() -> Recording:
        made.append(Recording())
        return made[-1]

    register_ordering("backwards", factory)
    try:
        fake.script("b", Fail(503))
        router = Router([fake_route(fake, n) for n in "ab"], order="backwards")
        assert _answered(router) == "openai/a"
        a, b = (r.id for r in router._life.now.routes)
        assert made[0].dispatched == [b, a]  # by id, the key statistics are kept under
        assert made[0].results == [(b, "server_error"), (a, "answered")]
        path = tmp_path / "policy.yaml"
        route = {"api_base": fake.base_url, "api_key": "os.environ/BACKWARDS_KEY"}
        path.write_text(
            yaml.safe_dump(
                {
                    "groups": {
                        "g": {
                            "order": "backwards",
                            "routes": [
                                {"model": f"openai/{n}", **route, "capabilities": {"tools": True}}
                                for n in "xy"
                            ],
                        }
                    }
                }
            )
        )
        os.environ["BACKWARDS_KEY"] = "sk-test-backwards"
        assert _answered(Router.from_config(path)) == "openai/y"
        assert len(made) == 2  # one ordering per router
    finally:
        unregister_ordering("backwards")
        os.environ.pop("BACKWARDS_KEY", None)
    with pytest.raises(ConfigError, match="'backwards' is not an ordering"):
        Router([fake_route(fake, "a")], order="backwards")


def test_register_ordering_refuses_built_in_and_odd_names() -> None:
    with pytest.raises(ConfigError, match="built-in"):
        register_ordering("cheapest", Recording)
    with pytest.raises(ConfigError, match="lower case"):
        register_ordering("My Order", Recording)


def test_a_rest_is_told_where_it_started_and_how_long_is_left(fake: FakeProvider) -> None:
    """The failing attempt that opened the breaker records the rest it started; health()
    gives the seconds left; AllRestingError names each route's last error."""
    clock = ManualClock()
    fake.script("a", Fail(503, "upstream a is down"))
    fake.script("b", Fail(502, "upstream b is down"))
    router = Router(
        [fake_route(fake, n) for n in "ab"], breaker=Breaker(failures=1, cooldown=30), clock=clock
    )
    with pytest.raises(Exception) as failed:
        router.completion(model="g", messages=MESSAGES)
    journey = failed.value.journey  # type: ignore[attr-defined]
    assert [a.rested for a in journey.attempts] == [30.0, 30.0]
    assert "(next route; it rests 30.0 s)" in str(journey)
    clock.advance(12)
    health = router.health()
    assert health["openai/a"].rest_left == pytest.approx(18.0)
    assert router.resting() == {"openai/a": pytest.approx(18.0), "openai/b": pytest.approx(18.0)}
    with pytest.raises(AllRestingError) as resting:
        router.completion(model="g", messages=MESSAGES)
    assert resting.value.last_errors == {
        "openai/a": "upstream a is down",
        "openai/b": "upstream b is down",
    }
    assert "last errors: openai/a: upstream a is down; openai/b: upstream b is down" in str(
        resting.value
    )
    assert fake.requests() == 2


def test_a_stream_closed_before_its_end_tells_the_breaker_nothing(fake: FakeProvider) -> None:
    """Closing an unfinished stream is recorded as "closed by the caller": no success for
    the breaker (its failure count stays), no failure either; a stream read to its end
    is the success."""
    fake.script("a", Fail(503))
    router = Router([fake_route(fake, n) for n in "ab"], breaker=Breaker(failures=3))
    assert _answered(router) == "openai/b"
    assert router.health()["openai/a"].failures == 1
    fake.script("a", Reply("one two three four five six seven eight"))
    stream = router.completion(model="g", messages=MESSAGES, stream=True)
    next(iter(stream))
    stream.close()
    (attempt,) = stream.journey.attempts
    assert attempt.route == "openai/a" and attempt.then == "closed by the caller"
    assert "closed by the caller before its end" in str(stream.journey)
    assert router.health()["openai/a"].failures == 1  # neither reset nor counted up
    whole = router.completion(model="g", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in whole)
    assert router.health()["openai/a"].failures == 0 and whole.restarts == 0


def test_a_routed_stream_counts_its_restarts(fake: FakeProvider) -> None:
    told: list[object] = []
    fake.script("a", Cut(after=2, reply=Reply("the first answer is cut short here")))
    router = Router(
        [fake_route(fake, n) for n in "ab"], stream_failure="restart", on_restart=told.append
    )
    stream = router.completion(model="g", messages=MESSAGES, stream=True)
    for _ in stream:
        pass
    assert stream.restarts == 1 == len(told) and stream.route == "openai/b"
