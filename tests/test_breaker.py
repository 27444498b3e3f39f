"""The breaker as pure code on a manual clock: the whole diagram, no sleeps, no network."""

from __future__ import annotations

from typing import Any

import pytest

from policy_router import Breaker, ConfigError, Health, InMemoryStore, ManualClock
from policy_router.ground.outcome import Fault, FaultKind
from policy_router.policies.breaker import HealthBook, RestClosed, RestOpened

from .conftest import Stepped

SERVER = Fault(FaultKind.SERVER_ERROR, 503, "overloaded")


def book(breaker: Breaker) -> tuple[Any, list[object]]:
    events: list[object] = []
    return Stepped(HealthBook(breaker, InMemoryStore(), events.append)), events


def test_the_whole_diagram_with_doubling_and_cap() -> None:
    """closed → open → half-open → (fail: doubled rest, capped) → half-open → closed."""
    clock = ManualClock()
    health, events = book(Breaker(failures=3, cooldown=10, max_cooldown=25))
    for _ in range(2):
        health.failed("r", SERVER, clock.now())
        assert health.admit("r", clock.now()) is None  # still closed: below the threshold
    health.failed("r", SERVER, clock.now())
    skip = health.admit("r", clock.now() + 4)
    assert skip is not None and skip.reason == "resting 6.0 s more after 3 failures"
    rests = []
    for _ in range(3):
        clock.advance(health.store.health("r").rest)
        assert health.admit("r", clock.now()) is True  # this request holds the probe
        other = health.admit("r", clock.now())
        assert other is not None and other.reason.startswith("half-open: another request")
        health.failed("r", SERVER, clock.now())
        rests.append(health.store.health("r").rest)
    assert rests == [20, 25, 25]
    clock.advance(25)
    assert health.admit("r", clock.now()) is True
    health.succeeded("r")
    assert health.store.health("r") == Health()
    assert events == [
        RestOpened(route="r", rest=10, failures=3, error="overloaded", first=True),
        RestOpened(route="r", rest=20, failures=4, error="overloaded", first=False),
        RestOpened(route="r", rest=25, failures=5, error="overloaded", first=False),
        RestOpened(route="r", rest=25, failures=6, error="overloaded", first=False),
        RestClosed("r", 6),
    ]


@pytest.mark.parametrize(
    ("fault", "rest"),
    [
        (Fault(FaultKind.RATE_LIMITED, 429, "slow down", retry_after=7), 7),
        (Fault(FaultKind.RATE_LIMITED, 429, "slow down", retry_after=99_999), 3600),
        (Fault(FaultKind.RATE_LIMITED, 429, "slow down"), 30),
        (Fault(FaultKind.ACCESS, 401, "bad key"), 3600),
    ],
)
def test_rate_limits_and_access_errors_open_at_once(fault: Fault, rest: float) -> None:
    """A 429 rests for Retry-After (an hour at most) or the cooldown; 401/403/404 for
    `settled`."""
    health, _ = book(Breaker(failures=3, cooldown=30, max_cooldown=100, settled=3600))
    health.failed("r", fault, 0.0)
    record = health.store.health("r")
    assert (record.state, record.rest, record.rest_until) == ("open", rest, rest)


@pytest.mark.parametrize("kind", [FaultKind.BAD_REQUEST, FaultKind.REFUSED])
def test_request_errors_and_refusals_never_count(kind: FaultKind) -> None:
    """Faults about the request or the work leave the breaker closed."""
    health, events = book(Breaker(failures=1))
    for _ in range(5):
        health.failed("r", Fault(kind, 400, "no"), 0.0)
    assert health.store.health("r") == Health() and events == []


def test_a_probe_given_back_can_be_claimed_again() -> None:
    """A probe claimed by a request that was not sent (say, the budget refused) is released."""
    health, _ = book(Breaker(failures=1, cooldown=5))
    health.failed("r", SERVER, 0.0)
    assert health.admit("r", 5.0) is True
    health.release("r")
    assert health.admit("r", 5.0) is True


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"failures": 0}, "failures must be a whole number"),
        ({"cooldown": -1}, "cooldown must be seconds > 0"),
        ({"cooldown": 10, "max_cooldown": 5}, "max_cooldown must be at least cooldown"),
    ],
)
def test_bad_breaker_settings_are_refused(kwargs: dict[str, float], match: str) -> None:
    """A breaker that cannot work is a ConfigError naming the field."""
    with pytest.raises(ConfigError, match=match):
        Breaker(**kwargs)  # type: ignore[arg-type]
