"""A stream its caller closes before its end is no success (issue 38): observers, the
attempt log's report and the metrics store record it as closed, neither a success nor a
failure, and `Order.SCORE`'s history holds nothing of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policy_router import AttemptLog, Router, SQLiteMetrics
from policy_router.core.journey import Attempt
from policy_router.testing import FakeProvider, Reply

from .conftest import MESSAGES, fake_route

TEXT = " ".join(f"w{i}" for i in range(40))


def _one_closed_one_whole(router: Router, fake: FakeProvider) -> Any:
    fake.script("a", Reply(TEXT))
    stream = router.completion(model="g", messages=MESSAGES, stream=True)
    next(iter(stream))
    stream.close()
    fake.script("a", Reply(TEXT))
    whole = router.completion(model="g", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in whole if c.choices).split() == TEXT.split()
    return stream


def test_observers_and_the_attempt_log_see_it_closed(fake: FakeProvider, tmp_path: Path) -> None:
    seen: list[Any] = []
    log = AttemptLog(tmp_path / "attempts.db")
    router = Router([fake_route(fake, "a")], observers=[seen.append, log])
    stream = _one_closed_one_whole(router, fake)
    assert [e.outcome for e in seen if isinstance(e, Attempt)] == ["closed", "answered"]
    assert "closed by the caller before its end" in str(stream.journey)
    assert stream.journey.answered_by == "openai/a"
    (route,) = router.report(since=None).routes
    assert (route.requests, route.answered, route.top_failures) == (2, 1, ())
    router.close()


def test_the_metrics_store_keeps_it_out_of_success_and_speed(fake: FakeProvider, tmp_path: Path) -> None:
    router = Router([fake_route(fake, "a")], metrics=SQLiteMetrics(tmp_path / "metrics.db"))
    _one_closed_one_whole(router, fake)
    assert router.flush_metrics()
    (route,) = [r for r in router.report(since=None).routes if r.requests]
    assert route.answered == 1 and route.top_failures == ()
    (score,) = router.scores("g", streaming=True)
    assert score.evidence.attempts == 1 and score.evidence.successes == 1
    assert score.evidence.errors == 0
    router.close()
