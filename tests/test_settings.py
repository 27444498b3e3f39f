"""Every number a user sets in the public API is refused by name, before anything is sent,
when it is NaN or infinite: a NaN setting compares false with everything, so it would turn a
mechanism off in silence (a breaker that never rests, a backoff that sleeps for an error)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import litellm
import pytest

import policy_router
from policy_router import (
    Breaker,
    Budget,
    ConfigError,
    Fastest,
    Hedge,
    ManualClock,
    PostgresMetrics,
    Price,
    RedisStore,
    Retry,
    Route,
    Router,
    Score,
    SQLiteMetrics,
    SQLiteStore,
)
from policy_router.testing import Fail, FakeProvider

from .conftest import MESSAGES, fake_route

# Each public constructor that takes a number as a setting, with what else it needs.
SETTINGS: dict[str, Callable[..., Any]] = {
    "Breaker": Breaker,
    "Budget": lambda **kw: Budget(**{"cap": "1", **kw}),
    "Fastest": Fastest,
    "Hedge": Hedge,
    "ManualClock": ManualClock,
    "PostgresMetrics": lambda **kw: PostgresMetrics("postgresql://127.0.0.1:1/x", **kw),
    "Price": lambda **kw: Price(**{"input": "1", "output": "1", **kw}),
    "RedisStore": RedisStore,
    "Retry": Retry,
    "Route": lambda **kw: Route("openai/x", api_base="http://127.0.0.1:9", **kw),
    "Router": lambda **kw: Router([Route("openai/x", api_base="http://127.0.0.1:9")], **kw),
    "SQLiteMetrics": lambda **kw: SQLiteMetrics(Path("unused.sqlite"), **kw),
    "SQLiteStore": lambda **kw: SQLiteStore(Path("unused-state.sqlite"), **kw),
    "Score": Score,
}
# Public classes whose numbers are read, not set: records the router hands out, and errors.
READ_ONLY = {
    "AllRestingError", "Attempt", "BudgetThreshold", "DeadlineExceededError", "Health", "Journey", "MetricRow",
    "OrderContext", "RateLimitedError", "RestOpened", "RetryContext", "RouteScore",
    "StoreBack", "Waited", "Window",
}  # fmt: skip
# Settings that are a LiteLLM keyword passed through, checked all the same.
PASSED_THROUGH = {("Route", "timeout")}


def _number_settings() -> list[tuple[str, str]]:
    """Every (public class, parameter) whose annotation or default is a number."""
    found = []
    for name in policy_router.__all__:
        obj = getattr(policy_router, name)
        if not inspect.isclass(obj) or name in READ_ONLY or issubclass(obj, BaseException):
            continue
        try:
            parameters = inspect.signature(obj).parameters.values()
        except (TypeError, ValueError):
            continue
        for p in parameters:
            text = str(p.annotation)
            if "float" in text or "Decimal" in text or isinstance(p.default, float):
                found.append((name, p.name))
    return sorted(found)


NUMBER_SETTINGS = _number_settings() + sorted(PASSED_THROUGH)


def test_every_number_setting_of_the_public_api_is_listed_here() -> None:
    """A new number setting cannot slip past the test below: each is built here."""
    assert {owner for owner, _ in NUMBER_SETTINGS} <= set(SETTINGS)
    assert ("Breaker", "cooldown") in NUMBER_SETTINGS and ("Hedge", "otherwise") in NUMBER_SETTINGS


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "nan", "inf"])
@pytest.mark.parametrize(("owner", "field"), NUMBER_SETTINGS)
def test_a_non_finite_setting_is_refused_naming_its_field(
    owner: str, field: str, bad: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NaN and infinity, as floats or as the strings a file may carry, are a ConfigError
    that names the setting, raised when the object is made."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        SETTINGS[owner](**{field: bad})
    assert field in str(caught.value) or (owner, field) == ("Budget", "cap")
    assert "cap" in str(caught.value) or (owner, field) != ("Budget", "cap")


@pytest.mark.parametrize(
    ("section", "text"),
    [
        ("breaker", "breaker: {cooldown: .nan}"),
        ("breaker", "breaker: {max_cooldown: .inf}"),
        ("retry", "retry: {backoff: .nan}"),
        ("hedge", "hedge: {otherwise: .inf}"),
        ("deadline", "deadline: .nan"),
    ],
)
def test_a_non_finite_number_in_a_policy_file_is_refused_at_its_place(
    fake: FakeProvider, tmp_path: Path, section: str, text: str
) -> None:
    """`.nan` and `.inf` in a YAML policy file are refused with the section's name, where
    a NaN cooldown used to leave the breaker silently off."""
    path = tmp_path / "policy.yaml"
    path.write_text(
        "groups:\n  g:\n    routes:\n"
        f"      - {{model: openai/a, api_base: '{fake.base_url}'}}\n{text}\n"
    )
    with pytest.raises(ConfigError) as caught:
        Router.from_config(path)
    assert section in str(caught.value)
    assert not fake.requests()


def test_a_breaker_made_from_finite_settings_still_rests_a_failing_route(
    fake: FakeProvider,
) -> None:
    """The refusals above change nothing for good settings: three failures rest the route."""
    router = Router([fake_route(fake, "a")], breaker=Breaker(failures=1, cooldown=30.0))
    fake.script("a", Fail(503))
    with pytest.raises(litellm.ServiceUnavailableError):
        router.completion(model="g", messages=MESSAGES, max_tokens=5)
    assert 0 < router.resting()["openai/a"] <= 30
