"""`router.report()` and `policy-router report`: per route over a window, from the router's
own history or an attempt log, as a table, HTML, or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policy_router import AttemptLog, Breaker, Budget, PriceTable, Router
from policy_router.cli.main import main
from policy_router.observe.report import build
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from .conftest import MESSAGES, fake_route

TABLE = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "tests",
        "models": {
            "openai/a": {"input": "1", "output": "2"},
            "openai/b": {"input": "1", "output": "2"},
        },
    }
)


def traffic(fake: FakeProvider, **policies: Any) -> Router:
    """10 requests: a fails with 503 on four of them, b answers everything it gets."""
    fake.script("a", Fail(503), Reply("ok", usage=(10, 5)), Fail(503), Fail(503))
    fake.script("a", Reply("ok", usage=(10, 5)), Fail(503), *[Reply("ok", usage=(10, 5))] * 4)
    router = Router(
        [fake_route(fake, "a", prices=TABLE), fake_route(fake, "b", prices=TABLE)],
        budget=Budget("1"),
        **policies,
    )
    for _ in range(10):
        router.completion(model="g", messages=MESSAGES, max_tokens=5)
    return router


def test_the_report_counts_what_the_router_did(fake: FakeProvider) -> None:
    router = traffic(fake)
    report = router.report()
    assert (report.requests, report.answered) == (10, 10)
    a, b = report.routes
    assert (a.route, a.requests, a.answered) == ("openai/a", 10, 6)
    assert (b.route, b.requests, b.answered) == ("openai/b", 4, 4)
    assert a.success_rate == pytest.approx(0.6) and b.success_rate == 1.0
    assert a.p50 is not None and a.p95 is not None and a.p50 <= a.p95
    assert sum(m.micros for m in a.cost + b.cost) == router.spending().spent.micros
    ((failure, count),) = a.top_failures
    assert count == 4 and failure.startswith("server_error 503: The engine is currently overloaded")
    text = str(report)
    assert "10 requests (10 answered, 100.0%)" in text and "openai/a" in text and "60.0%" in text
    html = report._repr_html_()
    assert html.startswith("<p>") and "<table>" in html and "openai/b" in html


def test_skip_reasons_are_counted_with_their_numbers_folded(fake: FakeProvider) -> None:
    from policy_router import ManualClock

    clock = ManualClock()
    fake.script("a", Fail(503))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        breaker=Breaker(failures=1, cooldown=30),
        clock=clock,
    )
    for step in (0, 3, 4):
        clock.advance(step)
        router.completion(model="g", messages=MESSAGES)
    (a, b) = router.report().routes
    # "resting 27.0 s more" and "resting 23.0 s more" are one cause.
    assert a.top_skips == (("breaker: resting # s more after # failure", 2),)
    assert a.skipped == 2 and b.requests == 3


def test_the_window_leaves_older_rows_out() -> None:
    rows = [
        {
            "time": t,
            "group_name": "g",
            "route": "r",
            "outcome": "answered",
            "fault": None,
            "status": None,
            "latency": 0.1 * t,
            "first_chunk": None,
            "tokens_in": 1,
            "tokens_out": 1,
            "cost_micros": None,
            "currency": None,
            "journey_id": f"j{t}",
            "error": None,
        }
        for t in range(1, 11)
    ]
    report = build(rows, [], source="test", since=3.5, now=10.0)
    (r,) = report.routes
    assert r.requests == 4 and report.requests == 4  # times 7, 8, 9, 10
    assert (r.p50, r.p95) == (pytest.approx(0.8), pytest.approx(1.0))


def test_the_command_line_reads_an_attempt_log(
    fake: FakeProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "attempts.sqlite"
    router = traffic(fake, observers=[AttemptLog(path)])
    assert router.report().source == str(path)  # the log, when the router writes one
    assert main(["report", str(path), "--since", "all"]) == 0
    out = capsys.readouterr().out
    assert "10 requests (10 answered, 100.0%) over all rows" in out
    assert "top failures:" in out and "server_error 503" in out
    assert main(["report", str(path), "--json", "--since", "30m"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["since_seconds"] == 1800 and data["requests"] == 10
    assert [r["route"] for r in data["routes"]] == ["openai/a", "openai/b"]
    assert data["routes"][0]["cost"][0]["currency"] == "USD"


@pytest.mark.parametrize("since", ["soon", "-5m", "0"])
def test_a_bad_window_or_a_missing_log_is_one_line(
    since: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "attempts.sqlite"
    AttemptLog(path)  # not written yet: no file
    assert main(["report", str(path)]) == 2
    assert "no attempt log at" in capsys.readouterr().err
    path.write_bytes(b"")
    assert main(["report", str(path), f"--since={since}"]) == 2
    assert "--since must be" in capsys.readouterr().err


def test_a_slow_route_shows_in_its_percentiles(fake: FakeProvider) -> None:
    fake.script("a", *[Reply("ok")] * 8, Hang(0.3), Hang(0.3))
    router = Router([fake_route(fake, "a")])
    for _ in range(10):
        router.completion(model="g", messages=MESSAGES)
    (a,) = router.report().routes
    assert a.p50 is not None and a.p95 is not None
    assert a.p50 < 0.3 <= a.p95


def test_a_report_reads_as_its_table_at_the_repl_and_a_journey_html_keeps_its_summary(
    fake: FakeProvider,
) -> None:
    """`repr(router.report())` is the text table; a journey's HTML ends with "Answered by
    ... after N requests"."""
    router = Router([fake_route(fake, "a")])
    routed = router.route(model="g", messages=MESSAGES)
    text = repr(router.report())
    assert text == str(router.report()) and "RouteReport(" not in text and "openai/a" in text
    html = routed.journey._repr_html_()
    assert "Answered by openai/a after 1 request" in html
