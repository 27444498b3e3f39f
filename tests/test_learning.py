"""Routing that learns: every attempt recorded in a metrics store, `Order.SCORE` ranking
from it, shared by processes writing one store and kept across restarts."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from loguru import logger

from policy_router import (
    ConfigError,
    Order,
    PostgresMetrics,
    Route,
    Router,
    RouteScore,
    Score,
    SQLiteMetrics,
)
from policy_router.testing import Fail, FakeProvider, Reply

from ._postgres import PostgresServer
from ._redis import free_port
from .conftest import CAPS, MESSAGES


def _routes(fake: FakeProvider) -> list[Route]:
    return [
        Route(f"openai/{n}", group="g", api_base=fake.base_url, api_key=f"sk-learn-{n}", capabilities=CAPS)
        for n in "ab"
    ]


def _first(router: Router) -> str:
    """The route a request tried first."""
    routed = router.route(model="g", messages=MESSAGES)
    router.flush_metrics()
    return routed.journey.attempts[0].route


def test_a_route_that_starts_failing_is_ranked_last_and_a_restart_remembers(
    fake: FakeProvider, tmp_path: Path
) -> None:
    path = tmp_path / "metrics.sqlite"
    router = Router(_routes(fake), metrics=SQLiteMetrics(path), order=Order.SCORE)
    fake.script("a", *[Fail(503)] * 20)
    tried = [_first(router) for _ in range(6)]
    assert tried[0] == "openai/a"  # no history: both start at 0.75, listed order
    assert tried[2:] == ["openai/b"] * 4  # within two requests, a ranks last
    scores = {s.route: s for s in router.scores("g")}
    assert scores["openai/a"].total < scores["openai/b"].total
    assert scores["openai/a"].evidence.errors >= 1 and scores["openai/b"].evidence.successes >= 1
    router.close()
    restarted = Router(_routes(fake), metrics=SQLiteMetrics(path), order=Order.SCORE)
    assert _first(restarted) == "openai/b"  # ranks as before it stopped
    restarted.close()


def test_equal_scores_take_turns() -> None:
    """Routes whose history scores alike rotate with the group's turn rather than one
    always winning; a better one still comes first."""
    from policy_router.policies.candidate import candidate_for
    from policy_router.policies.order import OrderContext
    from policy_router.policies.score import Evidence, Scored

    routes = [Route(f"openai/{n}", group="g", capabilities=CAPS) for n in "abc"]
    candidates = [candidate_for(r, None, True) for r in routes]
    same = Evidence(attempts=10, successes=9, latency_weight=9, latency_total=4.5)
    history = {"openai/a": same, "openai/b": same, "openai/c": Evidence(attempts=10, successes=2, latency_weight=2, latency_total=1.0)}
    scored = Scored(Score(), lambda query: {rid: history[rid] for rid, _ in query.routes})
    firsts = [
        [c.name for c in scored.order(candidates, OrderContext(group="g", facts=None, now=0.0, turn=turn))]
        for turn in range(4)
    ]
    assert [f[0] for f in firsts] == ["openai/a", "openai/b", "openai/a", "openai/b"]
    assert all(f[-1] == "openai/c" for f in firsts)  # the worse one stays last


def test_scores_explain_their_parts(fake: FakeProvider, tmp_path: Path) -> None:
    fake.script("a", Reply("slow"), Reply("slow"))
    router = Router(_routes(fake), metrics=SQLiteMetrics(tmp_path / "m.sqlite"), order=Order.SCORE)
    for _ in range(3):
        _first(router)
    (a, b) = router.scores("g")
    assert isinstance(a, RouteScore) and (a.route, b.route) == ("openai/a", "openai/b")
    assert 0 < a.success_quality <= 1 and 0 < a.speed_quality <= 1 and a.cost_quality == 0.75
    assert str(a).startswith("score ") and "success" in str(a) and "attempts" in str(a)
    assert router.scores("g", streaming=True)[0].evidence.attempts == 0  # never blended
    router.close()


def test_history_that_cannot_be_read_falls_back_to_the_listed_order_with_one_warning(
    fake: FakeProvider, tmp_path: Path
) -> None:
    seen: list[str] = []
    sink = logger.add(lambda m: seen.append(str(m)), level="WARNING")
    dead = PostgresMetrics(f"postgresql://nobody@127.0.0.1:{free_port()}/none", timeout=0.5)
    try:
        router = Router(_routes(fake), metrics=dead, order=Order.SCORE)
        answered = [router.route(model="g", messages=MESSAGES).journey.answered_by for _ in range(3)]
    finally:
        logger.remove(sink)
    assert answered == ["openai/a"] * 3  # as listed; every call answered
    assert sum("cannot read history" in line for line in seen) == 1
    assert sum("cannot be written" in line for line in seen) <= 1  # one warning for writes too
    router.close()
    dead.close()  # the router's close leaves a store you passed open: its pool would retry for 5 min


def test_a_store_that_cannot_be_written_never_fails_a_call_and_counts_what_it_drops(
    fake: FakeProvider,
) -> None:
    dead = PostgresMetrics(f"postgresql://nobody@127.0.0.1:{free_port()}/none", timeout=0.2)
    router = Router(_routes(fake), metrics=dead)
    recorder = router._life.now.recorder
    assert recorder is not None
    recorder._size = 3  # a small buffer, to see it fill
    for _ in range(6):
        assert router.completion(model="g", messages=MESSAGES).choices[0].message.content
    assert not router.flush_metrics(timeout=0.3)
    assert recorder.pending <= 3 and recorder.dropped >= 3
    router.close()
    dead.close()


def test_order_score_needs_a_metrics_store(fake: FakeProvider) -> None:
    with pytest.raises(ConfigError, match="metrics=SQLiteMetrics"):
        Router(_routes(fake), order=Order.SCORE)
    with pytest.raises(ConfigError, match="metrics must be a MetricsStore"):
        Router(_routes(fake), metrics="metrics.sqlite")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"Score\.optimistic_start"):
        Score(optimistic_start=1.5)
    with pytest.raises(ConfigError, match=r"Score\.half_life must be a number >= 3600"):
        Score(half_life=60)  # history is summed per hour: finer would only pretend


def test_the_report_reads_the_metrics_store_regular_and_streaming_apart(fake: FakeProvider, tmp_path: Path) -> None:
    routes = [*_routes(fake), Route("openai/idle", group="g", api_base=fake.base_url, api_key="sk-i", capabilities=CAPS)]
    # No breaker: the 429 must not rest `a`, whose stream is read next.
    router = Router(routes, metrics=SQLiteMetrics(tmp_path / "m.sqlite"), breaker=None)
    fake.script("a", Fail(429))
    router.completion(model="g", messages=MESSAGES)
    list(router.completion(model="g", messages=MESSAGES, stream=True))
    rows = {(r.route, r.mode): r for r in router.report().routes}
    assert rows[("openai/a", "regular")].rate_limited == 1
    assert rows[("openai/b", "regular")].answered == 1
    assert rows[("openai/a", "streaming")].answered == 1
    assert rows[("openai/idle", "regular")].requests == 0  # listed, with no rows
    router.close()


WORKER = textwrap.dedent(
    """
    import json, sys
    from policy_router import Order, Route, Router, SQLiteMetrics, PostgresMetrics
    base, target, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    metrics = PostgresMetrics(target) if target.startswith("postgresql") else SQLiteMetrics(target)
    routes = [Route(f"openai/{m}", group="g", api_base=base, api_key="sk-learn-w",
                    capabilities={"tools": True, "streaming": True}) for m in "ab"]
    router = Router(routes, metrics=metrics, order=Order.SCORE, metrics_scope="app:shared")
    tried = []
    for _ in range(n):
        routed = router.route(model="g", messages=[{"role": "user", "content": "hi"}])
        router.flush_metrics()
        tried.append(routed.journey.attempts[0].route)
    router.close()
    print(json.dumps(tried))
    """
)


def _two_processes(fake: FakeProvider, target: str, tmp_path: Path) -> list[list[str]]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    fake.script("a", *[Fail(503)] * 40)
    procs = [
        subprocess.Popen([sys.executable, str(script), fake.base_url, target, "6"], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    return [json.loads(p.communicate(timeout=120)[0]) for p in procs]


def _learned(runs: list[list[str]]) -> None:
    for tried in runs:
        # Each process ranks the failing route last within a few requests: its own
        # failures or the other's, whichever the store has first.
        assert tried[3:] == ["openai/b"] * 3, tried


@pytest.mark.slow
def test_two_processes_on_one_sqlite_file_learn_together(fake: FakeProvider, tmp_path: Path) -> None:
    _learned(_two_processes(fake, str(tmp_path / "shared.sqlite"), tmp_path))


@pytest.mark.slow
def test_two_processes_on_one_postgres_learn_together_and_a_restart_remembers(
    fake: FakeProvider, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    dsn = postgres_server.database()
    PostgresMetrics(dsn).create()
    _learned(_two_processes(fake, dsn, tmp_path))
    fresh: Any = Router(_routes(fake), metrics=PostgresMetrics(dsn), order=Order.SCORE, metrics_scope="app:shared")
    assert _first(fresh) == "openai/b"
    fresh.close()


def test_a_policy_file_names_the_metrics_store_the_scope_and_the_score(
    fake: FakeProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    monkeypatch.setenv("LEARN_KEY", "sk-learn-file")
    route = {"api_base": fake.base_url, "api_key": "os.environ/LEARN_KEY", "capabilities": CAPS}
    (tmp_path / "policy.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "svc",
                "metrics": {"sqlite": "history.sqlite"},
                "metrics_scope": "svc:production",
                "score": {"success_weight": 2, "half_life": 86400},
                "groups": {"g": {"order": "score", "routes": [{"model": "openai/a", **route}, {"model": "openai/b", **route}]}},
            }
        )
    )
    with Router.from_config(tmp_path / "policy.yaml") as router:
        fake.script("a", Fail(503))
        _first(router)
        assert _first(router) == "openai/b"
        assert router._life.now.recorder is not None and router._life.now.recorder.scope == "svc:production"
        explained = {v.route: v.reason for v in router.explain(model="g", messages=MESSAGES).verdicts}
        assert "score " in explained["openai/a"] and "success" in explained["openai/a"]
    assert (tmp_path / "history.sqlite").exists()  # beside the file, as the attempt log is
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"metrics": {"sqlite": "a", "duckdb": "b"}, "groups": {"g": {"routes": [{"model": "openai/a", **route}]}}}))
    with pytest.raises(ConfigError, match="exactly one of sqlite, duckdb, postgres"):
        Router.from_config(bad)


def test_the_metrics_verbs_create_inspect_and_migrate_a_target(
    tmp_path: Path, postgres_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from policy_router.cli import main

    for target in (str(tmp_path / "m.sqlite"), f"duckdb:{tmp_path / 'm.duckdb'}", postgres_server.database()):
        assert main(["metrics", "inspect", target]) == 1
        assert "absent" in capsys.readouterr().out
        assert main(["metrics", "create", target]) == 0
        assert main(["metrics", "create", target]) == 2  # refused: already there
        assert "already holds" in capsys.readouterr().err
        assert main(["metrics", "migrate", target]) == 0
        capsys.readouterr()
        assert main(["metrics", "inspect", target, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "current"


def test_the_report_verb_reads_a_metrics_store(fake: FakeProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policy_router.cli import main

    path = tmp_path / "m.sqlite"
    with Router(_routes(fake), metrics=SQLiteMetrics(path), metrics_scope="app") as router:
        router.completion(model="g", messages=MESSAGES)
    assert main(["report", str(path), "--since", "all", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    first = printed["routes"][0]  # the file knows route ids, not the names a router gave them
    assert first["route"].startswith("openai/a@") and first["mode"] == "regular" and first["answered"] == 1


def test_one_group_ranked_by_score_beside_one_as_listed(fake: FakeProvider, tmp_path: Path) -> None:
    routes = [*_routes(fake), *(Route(r.model, group="h", api_base=fake.base_url, api_key="sk-h", capabilities=CAPS) for r in _routes(fake))]
    with Router(routes, metrics=SQLiteMetrics(tmp_path / "m.sqlite"), order={"g": Order.SCORE}) as router:
        fake.script("a", *[Fail(503)] * 10)
        for _ in range(3):
            _first(router)
        assert _first(router) == "openai/b"  # g learned
        # h, as listed, still asks a first: the same deployment's history does not reorder it
        assert router.route(model="h", messages=MESSAGES).journey.attempts[0].route == "openai/a#2"


def test_an_unknown_score_key_in_a_file_is_named(fake: FakeProvider, tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "p.yaml"
    route = {"model": "openai/a", "api_base": fake.base_url, "capabilities": CAPS}
    path.write_text(yaml.safe_dump({"score": {"sucess_weight": 2}, "groups": {"g": {"routes": [route]}}}))
    with pytest.raises(ConfigError, match=r"score: unknown key \['sucess_weight'\]"):
        Router.from_config(path)


@pytest.mark.parametrize("backend", ["sqlite", "duckdb", "postgres"])
def test_score_reads_the_history_of_the_scopes_it_names(
    fake: FakeProvider, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A staging router learns that route a fails; a production router reading only its
    own scope knows nothing of it, one naming both scopes (or "all") ranks a last at once;
    every router still writes under its own scope."""
    if backend == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        dsn = server.database()
        PostgresMetrics(dsn).create()

        def store() -> Any:
            return PostgresMetrics(dsn)
    else:
        from policy_router import DuckDBMetrics

        path = tmp_path / f"shared.{backend}"

        def store() -> Any:
            return SQLiteMetrics(path) if backend == "sqlite" else DuckDBMetrics(path)

    fake.script("a", *[Fail(503)] * 10)
    staging = Router(_routes(fake), metrics=store(), order=Order.SCORE, metrics_scope="svc:staging")
    for _ in range(4):
        _first(staging)
    staging.close()

    def production(scopes: Any) -> Router:
        return Router(
            _routes(fake), metrics=store(), order=Order.SCORE, metrics_scope="svc:production",
            score=Score(scopes=scopes),
        )

    alone = production(None)
    assert _first(alone) == "openai/a"  # its own scope holds nothing yet
    alone.close()
    for scopes in (["svc:staging", "svc:production"], "all"):
        together = production(scopes)
        assert _first(together) == "openai/b", scopes
        together.close()
    reader = store()
    assert {r.scope for r in reader.read()} == {"svc:staging", "svc:production"}
    # alone: a failed, b answered; each router reading both: b at once. All under its own.
    assert len(reader.read(scope="svc:production")) == 4
    reader.close()


@pytest.mark.parametrize("given", [[], "", ["ok", ""], 3, [3]])
def test_score_scopes_refuses_what_names_no_scope(given: Any) -> None:
    with pytest.raises(ConfigError, match=r"Score\.scopes"):
        Score(scopes=given)
