"""Breaker, retries, deadlines, orderings and preflight end to end against FakeProvider."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from typing import Any

import litellm
import pytest
from loguru import logger

from policy_router import (
    AllRestingError,
    Breaker,
    ConfigError,
    DeadlineExceededError,
    ManualClock,
    Order,
    OrderContext,
    Retry,
    Router,
)
from policy_router.config.spec import RetrySpec
from policy_router.core.journey import Attempt
from policy_router.ground.records import Skip
from policy_router.policies.breaker import RestOpened
from policy_router.policies.candidate import Candidate
from policy_router.testing import Cut, Fail, FakeProvider, Hang, Reply, Trickle

from .conftest import MESSAGES, fake_route
from .test_router import run


def test_half_open_lets_exactly_one_of_50_concurrent_requests_probe(fake: FakeProvider) -> None:
    """After the rest, one request probes the route while 49 concurrent ones skip it."""
    clock = ManualClock()
    fake.script("a", Fail(503), Hang(0.5))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        breaker=Breaker(failures=1, cooldown=10),
        clock=clock,
    )
    router.completion(model="g", messages=MESSAGES)
    assert router.resting() == {"openai/a": 10.0}
    clock.advance(10)

    async def fifty() -> list[Any]:
        return await asyncio.gather(
            *(router.aroute(model="g", messages=MESSAGES) for _ in range(50))
        )

    routed = asyncio.run(fifty())
    assert fake.requests("a") == 2  # the first failure, then exactly one probe
    assert sorted(r.route.name for r in routed).count("openai/a") == 1
    assert router.health()["openai/a"].state == "closed"


def test_a_route_failing_for_ten_minutes_costs_one_request_per_rest(fake: FakeProvider) -> None:
    """A dead route is probed once per rest period, shown by FakeProvider's counter."""
    clock = ManualClock()
    fake.script("dead", *[Fail(503)] * 1000)
    router = Router(
        [fake_route(fake, "dead"), fake_route(fake, "alive")],
        breaker=Breaker(failures=1, cooldown=30, max_cooldown=30),
        clock=clock,
    )
    for _ in range(120):  # a request every 5 s for 10 minutes
        assert router.route(model="g", messages=MESSAGES).route.name == "openai/alive"
        clock.advance(5)
    assert fake.requests("dead") == 600 // 30
    assert fake.requests("alive") == 120


def test_every_route_resting_is_all_resting_error_saying_when(fake: FakeProvider) -> None:
    """When every route that could serve rests, the error is transient and says when."""
    clock = ManualClock()
    fake.script("a", Fail(429, retry_after=40))
    fake.script("b", Fail(429, retry_after=20))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker(), clock=clock)
    with pytest.raises(litellm.RateLimitError):
        router.completion(model="g", messages=MESSAGES)
    clock.advance(5)
    with pytest.raises(AllRestingError, match=r"first wakes in 15\.0 s") as caught:
        router.completion(model="g", messages=MESSAGES)
    assert caught.value.wakes_in == 15.0
    assert fake.requests() == 2
    router.reset()
    assert router.resting() == {}


def test_retry_sends_exactly_attempts_requests_then_falls_through(fake: FakeProvider) -> None:
    """Retry(attempts=3) sends three requests to the route, then the next route answers."""
    fake.script("a", Fail(503), Fail(500), Fail(502))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        retry=Retry(attempts=3, backoff=0.01, jitter=False),
    )
    routed = router.route(model="g", messages=MESSAGES)
    assert (fake.requests("a"), fake.requests("b")) == (3, 1)
    assert [(a.route, a.wait, a.then) for a in routed.journey.attempts] == [
        ("openai/a", 0.0, "retry in 0.01 s"),
        ("openai/a", 0.01, "retry in 0.02 s"),
        ("openai/a", 0.02, "next route"),
        ("openai/b", 0.0, "returned"),
    ]


def test_retry_honours_retry_after_and_never_retries_a_bad_request(fake: FakeProvider) -> None:
    """A 429 with Retry-After: 1 on the only route is retried after a second; with another
    route left and no wait asked for (`rate_limited_wait=0`), that route is asked at once; a
    400 is not retried at all."""
    fake.script("a", Fail(429, retry_after=1), Reply("second time"))
    alone = Router([fake_route(fake, "a", retry=Retry(attempts=2))], breaker=None)
    started = time.monotonic()
    routed = alone.route(model="g", messages=MESSAGES)
    assert time.monotonic() - started >= 1.0
    assert routed.route.name == "openai/a" and routed.journey.attempts[1].wait == 1.0
    fake.script("a", Fail(429, retry_after=1))
    router = Router([
        fake_route(fake, "a", retry=Retry(attempts=2, rate_limited_wait=0)), fake_route(fake, "b"),
    ])
    started = time.monotonic()
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b" and time.monotonic() - started < 1.0
    assert routed.journey.attempts[0].rested == 1.0  # rests for its Retry-After, asked again after it
    router.reset()
    fake.script("a", Fail(400))
    with pytest.raises(litellm.BadRequestError):
        router.completion(model="g", messages=MESSAGES)
    assert fake.requests("a") == 4 and fake.requests("b") == 1


DRIVERS = ("sync", "async", "stream", "astream")
SLOW_PROVIDERS = {
    "silent": Hang(30),
    "trickling": Trickle(Reply("a b c d e f g h i j k l m n o p"), pieces=40, gap=0.25),
}


def open_request(router: Router, driver: str, **kw: Any) -> Any:
    """Route one request until the router hands back an answer or a stream (not read)."""
    kw = {"model": "g", "messages": MESSAGES, **kw}
    stream = {"stream": True} if "stream" in driver else {}
    if driver.startswith("a"):
        return asyncio.run(router.aroute(**kw, **stream))
    return router.route(**kw, **stream)


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("provider", SLOW_PROVIDERS)
def test_deadline_ends_the_request_in_time(fake: FakeProvider, provider: str, driver: str) -> None:
    """A silent or trickling provider with a 30 s timeout cannot hold a 2 s deadline up.

    A stream's deadline covers the wait for its first chunk: a trickling stream is handed
    over at once, and from then on the caller owns the pace.
    """
    fake.script("slow", SLOW_PROVIDERS[provider])
    router = Router([fake_route(fake, "slow")], deadline=2.0)
    started = time.monotonic()
    if provider == "trickling" and "stream" in driver:
        routed = open_request(router, driver, timeout=30)
        assert routed.route.name == "openai/slow"
    else:
        with pytest.raises(DeadlineExceededError) as caught:
            open_request(router, driver, timeout=30)
        assert caught.value.elapsed >= 2.0
    assert time.monotonic() - started < 3.0  # 2.0-2.2 s measured here; loaded machines vary
    assert fake.requests("slow") == 1


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
def test_per_attempt_timeout_leaves_time_for_the_fallback(fake: FakeProvider, driver: str) -> None:
    """With timeout=1 per attempt, a silent first route yields to the fallback in time."""
    fake.script("slow", Hang(30))
    router = Router([fake_route(fake, "slow"), fake_route(fake, "fallback")], deadline=2.0)
    started = time.monotonic()
    routed, text = run(router, driver, timeout=1)
    assert time.monotonic() - started < 2.0  # 1.3 s measured here
    assert routed.route.name == "openai/fallback" and text == "Hello from FakeProvider."


def test_an_abandoned_sync_call_still_settles_its_health(fake: FakeProvider) -> None:
    """The worker left running at the deadline reports its outcome to the breaker later."""
    fake.script("slow", Trickle(Reply("late"), pieces=4, gap=0.3))
    router = Router([fake_route(fake, "slow")], deadline=0.5, breaker=Breaker(failures=1))
    with pytest.raises(DeadlineExceededError) as caught:
        router.completion(model="g", messages=MESSAGES, timeout=30)
    assert "abandoned at the deadline" in str(caught.value)
    deadline = time.monotonic() + 5
    while router.health()["openai/slow"].state == "closed" and time.monotonic() < deadline:
        time.sleep(0.05)
        # It answered, late: a success keeps the breaker closed and clean.
        if fake.requests("slow") == 1 and router.health()["openai/slow"].failures == 0:
            break
    assert router.health()["openai/slow"].failures == 0


@pytest.mark.parametrize("value", [0, -1, "soon", math.inf, -math.inf, math.nan, True])
def test_bad_deadline_is_refused_before_sending(fake: FakeProvider, value: Any) -> None:
    """deadline <= 0, infinite, NaN or not a number is a ConfigError naming it, nothing sent."""
    with pytest.raises(ConfigError, match="deadline must be a finite number of seconds > 0"):
        Router([fake_route(fake, "a")]).completion(model="g", messages=MESSAGES, deadline=value)
    with pytest.raises(ConfigError, match="deadline must be"):
        Router([fake_route(fake, "a")], deadline=value)
    assert fake.requests() == 0


def test_healthiest_and_round_robin_orderings(fake: FakeProvider) -> None:
    """HEALTHIEST prefers fewer failures; ROUND_ROBIN starts one further on each call."""
    fake.script("a", Fail(503))
    healthy = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        order=Order.HEALTHIEST,
        breaker=Breaker(failures=5),
    )
    assert healthy.route(model="g", messages=MESSAGES).route.name == "openai/b"
    assert healthy.route(model="g", messages=MESSAGES).route.name == "openai/b"
    rr = Router([fake_route(fake, n) for n in ("x", "y", "z")], order="round_robin")
    names = [rr.route(model="g", messages=MESSAGES).route.name for _ in range(4)]
    assert names == ["openai/x", "openai/y", "openai/z", "openai/x"]


def test_fastest_learns_from_results(fake: FakeProvider) -> None:
    """FASTEST tries unmeasured routes first, then prefers the one that answered fastest."""
    fake.script("slow", Hang(0.3))
    router = Router([fake_route(fake, "slow"), fake_route(fake, "quick")], order=Order.FASTEST)
    first = [router.route(model="g", messages=MESSAGES).route.name for _ in range(2)]
    assert first == ["openai/slow", "openai/quick"]
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/quick"


class Reverse:
    """A caller's own ordering: the routes backwards, counting results."""

    def __init__(self) -> None:
        self.results: list[tuple[str, str]] = []

    def order(self, candidates: Sequence[Candidate], context: OrderContext) -> list[Candidate]:
        return list(reversed(candidates))

    def on_result(self, route: str, outcome: str, elapsed: float) -> None:
        self.results.append((route, outcome))


def test_custom_ordering_cannot_bring_back_a_removed_route(fake: FakeProvider) -> None:
    """A caller's ordering reorders what the checks left; the floor still holds."""
    ordering = Reverse()
    router = Router(
        [
            fake_route(fake, "local1"),
            fake_route(fake, "vendor", reach="vendor"),
            fake_route(fake, "local2"),
        ],
        order=ordering,
    )
    routed = router.route(model="g", messages=MESSAGES, on_device=True)
    assert routed.route.name == "openai/local2"
    assert fake.requests("vendor") == 0
    assert ordering.results == [(routed.route.id, "answered")]  # told the id, not the name


def test_observers_get_frozen_records_and_the_log_warns_once(fake: FakeProvider) -> None:
    """Skips, attempts and rests reach observers; the first rest is a WARNING with the text."""
    seen: list[object] = []
    lines: list[str] = []
    fake.script("a", Fail(503, "upstream melted"), Fail(503))
    clock = ManualClock()
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        breaker=Breaker(failures=1, cooldown=1),
        observers=[seen.append],
        clock=clock,
    )
    logger.enable("policy_router")  # the suite's conftest keeps it enabled too
    sink = logger.add(lambda m: lines.append(m.record["level"].name + " " + m), level="DEBUG")
    try:
        router.completion(model="g", messages=MESSAGES)
        clock.advance(1)
        router.completion(model="g", messages=MESSAGES)
    finally:
        logger.remove(sink)
    kinds = [type(r).__name__ for r in seen]
    request = ["RequestStarted", "AttemptStarted", "Attempt", "RestOpened"]
    request += ["AttemptStarted", "Attempt", "RequestEnded"]
    assert kinds == request * 2  # each request framed, each attempt announced, then told
    assert isinstance(seen[3], RestOpened) and seen[3].first
    assert isinstance(seen[2], Attempt) and isinstance(seen[5], Attempt | Skip)
    ids = {r.journey_id for r in seen if not isinstance(r, RestOpened)}  # type: ignore[attr-defined]
    assert len(ids) == 2
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert len(warnings) == 1 and "upstream melted" in warnings[0]


def test_preflight_denies_missing_credentials_and_rests_them(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A route without its key is Denied before any request; only a live verdict rests it."""
    from policy_router import Route

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = Route("openai/gpt-4o-mini", group="g")
    router = Router([keyless, fake_route(fake, "a")], breaker=Breaker(settled=600))
    verdicts = router.preflight()
    assert verdicts["openai/gpt-4o-mini"].state == "denied"
    assert "OPENAI_API_KEY" in verdicts["openai/gpt-4o-mini"].why
    assert verdicts["openai/a"].state == "ready"
    assert router.resting() == {}  # a verdict from no request rests nothing
    fake.script("a", Fail(401))
    live = asyncio.run(router.apreflight(live=True))
    assert live["openai/a"].state == "denied" and fake.requests("a") == 1
    assert router.resting()["openai/a"] > 590


@pytest.mark.parametrize("driver", ["stream", "astream"])
def test_restart_starts_the_answer_again_on_the_next_route(fake: FakeProvider, driver: str) -> None:
    """With stream_failure='restart' a cut answer restarts from scratch, after on_restart."""
    from policy_router import StreamRestart

    notices: list[StreamRestart] = []
    fake.script("a", Cut(after=3, reply=Reply("first model says")))
    fake.script("b", Reply("second model answers"))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        stream_failure="restart",
        on_restart=notices.append,
    )
    routed, text = run(router, driver)
    assert notices == [StreamRestart("openai/a", "openai/b", 3)]
    assert text == "first model" + "second model answers"  # the caller saw both, and was told
    journey = routed.response.journey
    assert [(a.route, a.outcome) for a in journey.attempts] == [
        ("openai/a", "stream_cut"),
        ("openai/b", "answered"),
    ]
    assert fake.requests("a") == fake.requests("b") == 1


def test_restart_without_a_next_route_raises_in_the_stream(fake: FakeProvider) -> None:
    """With no route left to restart on, the failure is raised inside the stream."""
    fake.script("a", Cut(after=2))
    router = Router([fake_route(fake, "a")], stream_failure="restart", on_restart=lambda _: None)
    with pytest.raises(litellm.ServiceUnavailableError):
        run(router, "stream")


def test_attempt_log_writes_one_row_per_attempt_from_threads(
    fake: FakeProvider, tmp_path: Any
) -> None:
    """Every attempt, sync or streamed, lands as one row, safely from many threads."""
    from concurrent.futures import ThreadPoolExecutor

    from policy_router import AttemptLog, Budget, PriceTable, read_attempts

    prices = PriceTable.from_dict(
        {
            "currency": "USD",
            "as_of": "2026-11-01",
            "source": "t",
            "models": {"openai/b": {"input": "1", "output": "1"}},
        }
    )
    path = tmp_path / "attempts.sqlite"
    fake.script("a", *[Fail(503)] * 21)
    router = Router(
        [fake_route(fake, "a", prices=prices), fake_route(fake, "b", prices=prices)],
        budget=Budget("1", unpriced="allow"),
        observers=[AttemptLog(path)],
        breaker=None,  # every call tries `a` first: 21 failures and 21 answers
    )
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda _: router.completion(model="g", messages=MESSAGES, max_tokens=5), range(20)
            )
        )
    list(router.completion(model="g", messages=MESSAGES, max_tokens=5, stream=True))
    rows = read_attempts(path)
    assert len(rows) == fake.requests() == 42
    answered = [r for r in rows if r["outcome"] == "answered"]
    assert len(answered) == 21 and all(r["route"] == "openai/b" for r in answered)
    assert all(r["tokens_in"] and r["cost_micros"] for r in answered)
    assert sum(r["first_chunk"] is not None for r in answered) == 1
    assert {r["fault"] for r in rows} == {None, "server_error"}
    assert len({r["journey_id"] for r in rows}) == 21


def test_a_broken_attempt_log_never_fails_a_call(fake: FakeProvider, tmp_path: Any) -> None:
    """A log that cannot write lets the call succeed."""
    from policy_router import AttemptLog

    router = Router([fake_route(fake, "a")], observers=[AttemptLog(tmp_path / "no" / "x.db")])
    assert router.completion(model="g", messages=MESSAGES).choices[0].message.content


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_deadline_keeps_litellms_connection(fake: FakeProvider, driver: str) -> None:
    """LiteLLM keys its cached client by the `timeout` it is given: a timeout that changed
    with every call (the deadline's time left) built a new client and TCP connection per
    call. The attempt's timeout is now the same on every call, so connections are reused."""
    router = Router([fake_route(fake, "a")], deadline=20)
    if driver == "sync":
        for _ in range(8):
            router.completion(model="g", messages=MESSAGES)
    else:

        async def eight() -> None:  # one event loop: LiteLLM's async clients are per loop
            for _ in range(8):
                await router.acompletion(model="g", messages=MESSAGES)

        asyncio.run(eight())
    assert fake.requests() == 8
    assert fake.connections() <= 2


def test_an_attempt_log_from_an_earlier_version_is_brought_up_to_date(
    fake: FakeProvider, tmp_path: Any
) -> None:
    """A log written before the error column and the skips table keeps its rows and gains
    both on the first write; an old log is read without them."""
    import sqlite3

    from policy_router import AttemptLog, read_attempts, read_skips

    path = tmp_path / "old.sqlite"
    old = (
        "time, group_name, route, outcome, fault, status, latency, first_chunk, tokens_in, "
        "tokens_out, cost_micros, currency, journey_id"
    )
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TABLE attempts ({old})")
        db.execute(f"INSERT INTO attempts VALUES ({', '.join('?' * 13)})", (1.0, "g", "x", "answered", *[None] * 8, "j0"))
    assert read_skips(path) == [] and len(read_attempts(path)) == 1
    fake.script("a", Fail(503))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], observers=[AttemptLog(path)])
    router.completion(model="g", messages=MESSAGES)
    rows = read_attempts(path)
    assert [r["route"] for r in rows] == ["x", "openai/a", "openai/b"]
    assert rows[0]["error"] is None and "overloaded" in rows[1]["error"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_short_retry_after_is_waited_out_on_the_preferred_route_when_asked(
    fake: FakeProvider, driver: str
) -> None:
    """`Retry(rate_limited_wait=1)`: a 429 naming a 0.3 s Retry-After on the first route is
    waited out there (the route answers, the fallback is never asked); without it the
    fallback is asked at once; a Retry-After longer than the setting still moves on."""
    said = Fail(429, retry_after=0.3)
    for wait, expected in ((1.0, "openai/a"), (0.0, "openai/b"), (0.2, "openai/b")):
        fake.reset()
        fake.script("a", said, Reply("after the wait"))
        router = Router([
            fake_route(fake, "a", retry=Retry(attempts=2, rate_limited_wait=wait)),
            fake_route(fake, "b"),
        ])
        routed = open_request(router, driver)
        assert routed.route.name == expected, (wait, routed.journey)
        if expected == "openai/a":
            assert routed.journey.attempts[1].wait == 0.3 and fake.requests("b") == 0


@pytest.mark.parametrize("driver", DRIVERS)
def test_by_default_a_retry_waits_out_a_short_retry_after_and_not_a_long_one(
    fake: FakeProvider, driver: str
) -> None:
    """`Retry(attempts=2)` with nothing else set, as in a policy file's `retry:`: a 429
    naming a short Retry-After is waited out on the preferred route (the fallback never
    asked); one naming 30 s, or none, moves on to the fallback at once."""
    assert RetrySpec().made() == Retry()
    for said, expected in (
        (Fail(429, retry_after=0.3), "openai/a"),
        (Fail(429, retry_after=30), "openai/b"),
        (Fail(429), "openai/b"),
    ):
        fake.reset()
        fake.script("a", said, Reply("after the wait"))
        router = Router([fake_route(fake, "a", retry=Retry(attempts=2)), fake_route(fake, "b")])
        routed = open_request(router, driver)
        assert routed.route.name == expected, (said, routed.journey)
        if expected == "openai/a":
            assert routed.journey.attempts[1].wait == 0.3 and fake.requests("b") == 0
        else:  # nothing waited: the fallback asked as soon as the 429 came
            assert fake.requests("a") == 1 and [a.wait for a in routed.journey.attempts] == [0, 0]


@pytest.mark.parametrize("verdict", [True, False])
def test_a_retry_decision_is_asked_for_a_429_while_other_routes_are_queued(
    fake: FakeProvider, verdict: bool
) -> None:
    """`Retry(decide=...)` is your decision for every fault about the provider, a 429 with
    another route queued included: True waits out its Retry-After on the same route, False
    asks the next route."""
    asked: list[Any] = []

    def decide(context: Any) -> bool:
        asked.append(context)
        return verdict

    fake.script("a", Fail(429, retry_after=0.2), Reply("after the wait"))
    router = Router([fake_route(fake, "a", retry=Retry(attempts=2, decide=decide)), fake_route(fake, "b")])
    routed = router.route(model="g", messages=MESSAGES)
    assert [(c.kind, c.retry_after) for c in asked] == [("rate_limited", 0.2)]
    assert routed.route.name == ("openai/a" if verdict else "openai/b")
