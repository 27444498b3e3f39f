"""The log observer: its lines follow loguru's switches for the package, call by call."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from loguru import logger

from policy_router import Breaker, Router
from policy_router.core.journey import Attempt
from policy_router.ground.records import Check, Skip
from policy_router.observe import observers
from policy_router.observe.observers import LogObserver
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


class _Loguru:
    """A loguru that keeps its per-module decision somewhere this package does not know."""

    def __init__(self, core: object) -> None:
        self._core = core
        self.lines: list[str] = []

    def debug(self, message: str, *args: object) -> None:
        self.lines.append(message.format(*args))


@pytest.mark.parametrize(
    "core", [None, object(), SimpleNamespace(enabled=None), SimpleNamespace(enabled={"x": False})]
)
def test_a_loguru_keeping_its_decision_elsewhere_gets_every_line(
    core: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where loguru's cached decision is not where this loguru keeps it (no core, no dict,
    no entry for the module), the observer skips nothing: the line goes to loguru, which
    decides."""
    stub = _Loguru(core)
    monkeypatch.setattr(observers, "logger", stub)
    LogObserver()(Skip("openai/a", Check.KNOWN, "a reason nobody listed", journey_id="j1"))
    assert len(stub.lines) == 1 and stub.lines[0].startswith("policy_router: [j1] ")


class _Raising(_Loguru):
    """A loguru whose every line raises, as a broken sink configured to raise would."""

    def __init__(self) -> None:
        super().__init__(None)
        self.warnings: list[str] = []

    def debug(self, message: str, *args: object) -> None:
        raise RuntimeError("the sink is broken")

    def warning(self, message: str, *args: object) -> None:
        self.warnings.append(message.format(*args))


def test_a_log_that_raises_fails_no_call_and_the_callers_observers_see_everything(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The router's own log raising on every line: each call is answered all the same, on
    the express lane (no observer of the caller's) and on the plan (one that frames
    requests); the caller's observer and the history still get every attempt, and it is
    said once per router."""
    stub = _Raising()
    monkeypatch.setattr(observers, "logger", stub)
    seen: list[object] = []
    routes = [fake_route(fake, "a"), fake_route(fake, "b")]
    for router in (Router(routes), Router(routes, observers=[seen.append])):
        for _ in range(3):
            response = router.completion(model="g", messages=MESSAGES)
            assert response._hidden_params["policy_router"].answered_by == "openai/a"
        report = router.report()
        assert (report.requests, report.answered) == (3, 3)
    assert sum(isinstance(r, Attempt) for r in seen) == 3
    assert len(stub.warnings) == 2 and all("the sink is broken" in w for w in stub.warnings)
