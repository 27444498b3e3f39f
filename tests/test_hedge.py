"""Hedged requests (issue 36): a second attempt beside a slow first one, bounded by the
budget, the floor, the requirements and the deadline; the first answer wins."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections import Counter
from typing import Any

import pytest

from policy_router import Budget, ConfigError, Hedge, Route, Router
from policy_router.policies.hedge import Latencies
from policy_router.testing import FakeProvider, Hang, Reply, Step

from .conftest import CAPS, fake_route, prices

ASK = [{"role": "user", "content": "hello"}]
FAST, SLOW = 0.03, 0.6  # the tail: one request in twenty, twenty times slower
WARM, MEASURED = 20, 60


class Tail:
    """A provider whose time to first token has a slow tail: per model, every twentieth
    request waits `SLOW` seconds, the rest `FAST`."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.slow = 0
        self._lock = threading.Lock()

    def __call__(self, path: str, body: dict[str, Any]) -> Step:
        model = str(body.get("model"))
        with self._lock:
            self.seen[model] += 1
            slow = self.seen[model] > WARM and self.seen[model] % 20 == 10
            self.slow += slow
        return Hang(SLOW if slow else FAST, Reply("hi there", usage=(5, 3)))


def _p99(values: list[float]) -> float:
    ranked = sorted(values)
    return ranked[int(0.99 * len(ranked)) - 1]


def _first_tokens(router: Router, count: int, journeys: list[Any]) -> list[float]:
    """Times to first token of `count` streamed calls, read as a caller reads them."""
    times = []
    for _ in range(count):
        started = time.perf_counter()
        stream = router.completion(model="g", messages=ASK, stream=True, max_tokens=16)
        chunks = iter(stream)
        next(chunks)
        times.append(time.perf_counter() - started)
        for _ in chunks:
            pass
        journeys.append(stream)
    return times


@pytest.mark.slow
def test_a_p95_hedge_cuts_the_slow_tail_for_few_extra_requests() -> None:
    """With `Hedge(after="p95")` the p99 of time to first token falls at least 4x against
    the same provider unhedged, extra requests stay under 10%, the budget is never passed,
    and every request the provider received is an attempt of some journey."""
    table = prices(a="1000", b="1000")
    results: dict[str, tuple[float, int]] = {}
    for hedged in (False, True):
        tail = Tail()
        with FakeProvider(responder=tail) as fake:
            routes = [fake_route(fake, m, prices=table) for m in ("a", "b")]
            budget = Budget("5.00")
            router = Router(routes, budget=budget, hedge=Hedge(after="p95") if hedged else None)
            streams: list[Any] = []
            _first_tokens(router, WARM, streams)  # the history the p95 is read from
            times = _first_tokens(router, MEASURED, streams)
            # A sync loser keeps running on its worker until its reply ends: let it.
            time.sleep(SLOW + 0.2)
            spending = router.spending()
            assert spending.spent <= spending.cap and spending.in_flight == 0, spending
            attempts = sum(len(s.journey.attempts) for s in streams)
            assert attempts == fake.requests(), (attempts, fake.requests())
            assert all(s.text == "hi there" for s in streams)
            results["hedged" if hedged else "plain"] = (_p99(times), fake.requests())
    plain_p99, plain_requests = results["plain"]
    hedged_p99, hedged_requests = results["hedged"]
    assert plain_requests == WARM + MEASURED
    assert hedged_p99 * 4 <= plain_p99, results
    assert hedged_requests - plain_requests < 0.10 * (WARM + MEASURED), results


def test_the_loser_is_charged_and_both_attempts_are_in_the_journey(fake: FakeProvider) -> None:
    """A hedge after 0.05 s on a first attempt that takes 0.5 s: the second route answers,
    the first is cancelled, charged its reservation (it was sent), and no fault of its
    route; both attempts are in the journey, in the order they left."""
    fake.script("a", Hang(0.5, Reply("late", usage=(5, 3))))
    router = Router(
        [fake_route(fake, m, prices=prices(a="1000", b="1000")) for m in ("a", "b")],
        budget=Budget("5.00"),
        hedge=Hedge(after=0.05),
    )

    async def go() -> Any:
        return await router.aroute(model="g", messages=ASK, max_tokens=10)

    routed = asyncio.run(go())
    assert routed.route.name == "openai/b"
    assert routed.response.choices[0].message.content != "late"
    first, second = routed.journey.attempts
    assert (first.route, first.outcome) == ("openai/a", "cancelled")
    assert "lost the hedge to openai/b" in first.then and first.sent
    assert first.cost is not None and first.cost.micros > 0  # its reservation: it may have billed
    assert second.ok and second.route == "openai/b"
    assert fake.requests("a") == 1 and fake.requests("b") == 1
    assert router.health()["openai/a"].failures == 0
    spending = router.spending()
    costs = [a.cost.micros for a in routed.journey.attempts if a.cost is not None]
    assert spending.spent.micros == sum(costs)
    assert not spending.is_exact and spending.in_flight == 0


def test_no_hedge_leaves_when_the_budget_cannot_hold_both(fake: FakeProvider) -> None:
    """The budget holds one worst case but not two: the slow first attempt is waited for,
    the journey says the hedge was not sent and why, and the second route gets nothing."""
    fake.script("a", Hang(0.3, Reply("slow but fine", usage=(5, 3))))
    table = prices(a="1000", b="1000")
    router = Router(
        [fake_route(fake, m, prices=table) for m in ("a", "b")],
        budget=Budget("0.15"),  # one call's worst case is about 0.1 (100 tokens at $1/k)
        hedge=Hedge(after=0.02),
    )
    routed = router.route(model="g", messages=ASK, max_tokens=90)
    assert routed.response.choices[0].message.content == "slow but fine"
    assert fake.requests("b") == 0
    (skip,) = [s for s in routed.journey.skips if s.route == "openai/b"]
    assert skip.reason.startswith("hedge not sent:") and "budget" in skip.reason.lower()
    assert router.spending().spent <= router.spending().cap


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_no_hedge_to_a_vendor_under_on_device(fake: FakeProvider, mode: str) -> None:
    """Under `on_device=True` a slow on-device route is never hedged with a vendor's: the
    vendor is skipped for the floor and receives nothing, however long the first takes."""
    fake.script("local", Hang(0.2, Reply("private answer")))
    router = Router(
        [
            fake_route(fake, "local", on_device=True),
            Route("openai/vendor", group="g", api_base="https://api.example.invalid/v1",
                  api_key="sk-vendor-test-0000", capabilities=CAPS),
        ],
        hedge=Hedge(after=0.01),
    )
    kw: dict[str, Any] = {"model": "g", "messages": ASK, "on_device": True}
    routed = router.route(**kw) if mode == "sync" else asyncio.run(router.aroute(**kw))
    assert routed.route.name == "openai/local"
    assert [a.route for a in routed.journey.attempts] == ["openai/local"]
    assert any(s.route == "openai/vendor" for s in routed.journey.skips)


def test_a_hedge_needs_the_requirements_too(fake: FakeProvider) -> None:
    """A call with tools: a route without tools is no hedge for it."""
    fake.script("tools", Hang(0.2, Reply("done")))
    router = Router(
        [fake_route(fake, "tools", capabilities={**CAPS, "tools": True}),
         fake_route(fake, "plain", capabilities={**CAPS, "tools": False})],
        hedge=Hedge(after=0.01),
    )
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    routed = router.route(model="g", messages=ASK, tools=[tool])
    assert routed.route.name == "openai/tools" and fake.requests("plain") == 0


def test_the_hedge_stays_inside_the_deadline(fake: FakeProvider) -> None:
    """Both attempts silent: the call ends at its deadline with both in the journey, not
    after either attempt's own timeout."""
    fake.script("a", Hang(5.0, Reply()))
    fake.script("b", Hang(5.0, Reply()))
    router = Router([fake_route(fake, m) for m in ("a", "b")], hedge=Hedge(after=0.05))
    started = time.perf_counter()
    with pytest.raises(TimeoutError) as raised:
        asyncio.run(router.aroute(model="g", messages=ASK, deadline=0.4))
    assert time.perf_counter() - started < 3.0
    assert fake.requests() == 2
    assert "openai/b" in str(raised.value)


def test_a_per_call_hedge_and_a_group_hedge(fake: FakeProvider) -> None:
    """`hedge=` per call overrides the router's; `hedge=None` per call turns it off."""
    fake.script("a", Hang(0.3, Reply("slow")), Hang(0.3, Reply("slow")))
    router = Router([fake_route(fake, m) for m in ("a", "b")])
    off = router.route(model="g", messages=ASK)
    assert off.route.name == "openai/a" and fake.requests("b") == 0
    on = router.route(model="g", messages=ASK, hedge=Hedge(after=0.02))
    assert on.route.name == "openai/b"


def test_the_p95_delay_is_read_from_the_route_s_own_history() -> None:
    """Until `samples` answers are known the delay is `otherwise`; then the route's 95th
    percentile, never under `at_least`; a slow loser's time stays in the history."""
    seen = Latencies()
    hedge = Hedge(after="p95", otherwise=1.5, samples=20, at_least=0.05)
    for _ in range(19):
        seen.record("a", 0.01)
    assert hedge.delay(seen, "a") == 1.5
    seen.record("a", 0.01)
    assert hedge.delay(seen, "a") == 0.05  # the floor
    for _ in range(100):
        seen.record("b", 0.2)
    seen.record("b", 3.0)
    assert hedge.delay(seen, "b") == 0.2
    assert Hedge(after=0.3).delay(seen, "b") == 0.3


@pytest.mark.parametrize(
    ("kw", "field"),
    [({"after": 0}, "after"), ({"after": "p99"}, "after"), ({"after": float("inf")}, "after"),
     ({"at_least": -1}, "at_least"), ({"otherwise": 0}, "otherwise"), ({"samples": 0}, "samples")],
)
def test_a_bad_hedge_names_its_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=f"Hedge {field}"):
        Hedge(**kw)


HANG = 1.5  # how long both routes take to answer in the cancellation tests


def _hedged_router(fake: FakeProvider, seen: list[Any], **policies: Any) -> Router:
    """Two slow routes, a hedge after 0.05 s, a budget and rate limits to hold things."""
    for model in ("a", "b"):
        fake.script(model, Hang(HANG, Reply("late", usage=(5, 3))))
    return Router(
        [fake_route(fake, m, prices=prices(a="1000", b="1000"), rpm=100) for m in ("a", "b")],
        budget=Budget("5.00"),
        hedge=Hedge(after=0.05),
        observers=[seen.append],
        **policies,
    )


def _nothing_held(router: Router) -> bool:
    spending = router.spending()
    usage = router.usage()
    return (
        spending.reserved.micros == 0
        and spending.in_flight == 0
        and all(usage[r].in_flight == 0 for r in ("openai/a", "openai/b"))
    )


def _attempts(seen: list[Any]) -> list[Any]:
    from policy_router import Attempt

    return [s for s in seen if isinstance(s, Attempt)]


@pytest.mark.parametrize("deadline", [None, 5.0])
@pytest.mark.parametrize("streamed", [False, True])
def test_cancelling_a_hedged_async_call_records_each_request_once(
    fake: FakeProvider, deadline: float | None, streamed: bool
) -> None:
    """The caller's task is cancelled while the first attempt and its hedge are both out:
    each request the provider received is one attempt in the record (no double count), each
    charged once (it may have billed), and nothing stays reserved or in flight."""
    seen: list[Any] = []
    router = _hedged_router(fake, seen, deadline=deadline)
    started = time.monotonic()

    async def go() -> None:
        task = asyncio.ensure_future(
            router.acompletion(model="g", messages=ASK, max_tokens=10, stream=streamed)
        )
        for _ in range(100):  # until both are out (the hedge leaves at 0.05 s)
            if fake.requests() == 2:
                break
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    attempts = _attempts(seen)
    assert fake.requests() == 2
    assert len(attempts) == fake.requests()
    assert sorted(a.route for a in attempts) == ["openai/a", "openai/b"]
    assert all(a.outcome == "cancelled" and a.sent for a in attempts)
    assert _nothing_held(router)
    assert router.spending().spent.micros == sum(a.cost.micros for a in attempts if a.cost)
    # The provider still writes (and bills) both replies when its hang ends: wait for that
    # here, so no bill of this test lands in the next one's count.
    time.sleep(max(0.0, HANG - (time.monotonic() - started)) + 0.1)


@pytest.mark.parametrize("deadline", [None, 5.0])
@pytest.mark.parametrize("streamed", [False, True])
def test_ctrl_c_during_a_sync_hedged_call_holds_nothing_once_the_providers_answered(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, deadline: float | None, streamed: bool
) -> None:
    """Ctrl-C while the first attempt and its hedge are out on workers: the interruption
    goes on at once; the attempts end on their workers and settle then, so once both
    providers answered nothing is reserved or in flight, and each request is charged once."""
    from policy_router.drive import hedged

    seen: list[Any] = []
    router = _hedged_router(fake, seen, deadline=deadline)
    real_wait = hedged.wait
    calls = []

    def interrupted_wait(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the hedge has left: the caller presses Ctrl-C once both are out
            for _ in range(100):
                if fake.requests() == 2:
                    break
                time.sleep(0.02)
            raise KeyboardInterrupt
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(hedged, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        result = router.completion(model="g", messages=ASK, max_tokens=10, stream=streamed)
        if streamed:
            list(result)
    deadline_at = time.monotonic() + 5
    while not _nothing_held(router) and time.monotonic() < deadline_at:
        time.sleep(0.05)
    assert fake.requests() == 2
    assert _nothing_held(router)
    spending = router.spending()
    assert spending.calls == 2 and len(_attempts(seen)) == 2  # each request charged once
    if not streamed:  # by the usage each reported: 8 tokens at $1,000 a million
        assert spending.spent.micros == 2 * 8 * 1000
    else:  # a stream nobody will read is closed and charged its reservation
        assert spending.spent.micros > 2 * 8 * 1000 and spending.unmeasured == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hedges_add_at_most_their_share_under_a_uniformly_slow_provider(
    fake: FakeProvider, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every request of both routes is slow (0.08 s against a hedge after 0.01 s): without
    a bound every request would be sent twice. With the default `max_share` of 10%, forty
    requests cost at most four hedges, and the journeys say why the others were not sent."""

    def slow(path: str, body: dict[str, Any]) -> Step:
        return Hang(0.08, Reply("hi there", usage=(5, 3)))

    monkeypatch.setattr(fake, "responder", slow)
    router = Router([fake_route(fake, m) for m in ("a", "b")], hedge=Hedge(after=0.01))
    journeys = []
    for _ in range(40):
        if mode == "sync":
            journeys.append(router.route(model="g", messages=ASK, max_tokens=5).journey)
        else:
            journeys.append(asyncio.run(router.aroute(model="g", messages=ASK, max_tokens=5)).journey)
    hedges = fake.requests() - 40
    assert 1 <= hedges <= 4
    assert sum(len(j.attempts) for j in journeys) == fake.requests()
    held_back = [s for j in journeys for s in j.skips if s.check == "hedge"]
    assert len(held_back) == 40 - hedges and "Hedge.max_share" in held_back[0].reason
    time.sleep(0.2)  # a last loser still hanging answers (and bills) here, not in the next test


@pytest.mark.parametrize(
    ("endpoint", "kwargs", "hedged"),
    [
        ("responses", {}, False),  # stored by default at the provider
        ("responses", {"store": False}, True),
        ("responses", {"store": False, "background": True}, False),
        ("responses", {"store": False, "conversation": "conv_1"}, False),
        ("chat", {"store": True}, False),
        ("chat", {}, True),
    ],
)
def test_a_call_with_a_side_effect_at_the_provider_is_never_hedged(
    fake: FakeProvider, endpoint: str, kwargs: dict[str, Any], hedged: bool
) -> None:
    """A stored or background Responses call, a stored chat completion, a call that goes on
    with a conversation: two attempts would do it twice at the provider, so however slow
    the first one is, no second is sent."""
    fake.script("a", Hang(0.3, Reply("late", usage=(5, 3))))
    caps = {**CAPS, "responses": True, "chat": True}
    router = Router([fake_route(fake, m, capabilities=caps) for m in ("a", "b")], hedge=Hedge(after=0.02))
    if endpoint == "responses":
        router.responses(model="g", input="hello", **kwargs)
    else:
        router.completion(model="g", messages=ASK, **kwargs)
    time.sleep(0.35)  # a sync loser ends on its worker
    assert fake.requests() == (2 if hedged else 1)


def test_a_hedge_no_worker_began_when_the_race_was_won_is_never_sent(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker but one is busy: the first attempt runs on that one and its hedge waits
    in the queue. When the first answers, its worker could take the hedge next, before the
    caller woke to stop it, and the hedge left after the caller had its answer. Now it is
    never sent (the fallback receives nothing, even once the workers free up), the journey
    says so, and what it held is given back."""
    from concurrent.futures import ThreadPoolExecutor

    from policy_router.drive import workers

    for _ in range(3):
        fake.reset()
        pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="test-hedge")
        monkeypatch.setattr(workers, "WORKERS", pool)
        busy = threading.Event()
        pool.submit(busy.wait, 10)  # one worker busy: the hedge waits for the other
        fake.script("a", Hang(0.3, Reply("first", usage=(5, 3))))
        router = Router(
            [fake_route(fake, m, prices=prices(a="1000", b="1000")) for m in ("a", "b")],
            budget=Budget("5.00"),
            hedge=Hedge(after=0.05),
        )
        try:
            routed = router.route(model="g", messages=ASK, max_tokens=10)
        finally:
            busy.set()
        pool.shutdown(wait=True)  # whatever was still queued has run by now
        assert routed.route.name == "openai/a"
        assert fake.requests("a") == 1 and fake.requests("b") == 0
        assert [a.route for a in routed.journey.attempts] == ["openai/a"]
        skipped = [s.reason for s in routed.journey.skips if s.route == "openai/b"]
        assert skipped == ["not sent: lost the hedge to openai/a while it waited for a free worker"]
        spending = router.spending()
        assert spending.in_flight == 0 and spending.reserved.micros == 0


@pytest.mark.parametrize("ending", ["deadline", "ctrl-c"])
def test_a_hedge_refused_after_the_race_was_won_is_given_back_at_the_deadline_or_ctrl_c(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """The first attempt has answered and its hedge was refused by the worker that took it
    (never sent), but the answer's own future has not completed yet when the deadline
    passes, or the caller presses Ctrl-C. The refused hedge is still given back: the journey
    says it was not sent, and once the first attempt settles nothing is reserved or in
    flight (it used to keep its reservation and slot for ever, missing from the journey)."""
    import _thread
    from concurrent.futures import ThreadPoolExecutor

    from policy_router import DeadlineExceededError
    from policy_router.drive import hedged, workers

    class SlowToComplete(ThreadPoolExecutor):
        """Two workers, one kept busy until the first attempt answers; the answer's future
        completes only after the deadline passed or the caller was interrupted (a worker
        thread descheduled between its call returning and its future completing)."""

        def __init__(self) -> None:
            super().__init__(max_workers=2, thread_name_prefix="test-refused")
            self.busy, self.refused = threading.Event(), threading.Event()
            self.past_deadline = 0.0
            super().submit(self.busy.wait, 10)

        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            def watched() -> Any:
                try:
                    result = fn(*args, **kwargs)
                except hedged.Decided:
                    self.refused.set()
                    raise
                self.busy.set()  # the other worker frees up and takes the queued hedge
                self.refused.wait(5)
                if ending == "ctrl-c":
                    _thread.interrupt_main()
                    time.sleep(0.5)  # the caller has been interrupted
                else:
                    time.sleep(max(0.0, self.past_deadline - time.monotonic()))
                return result

            return super().submit(watched)

    pool = SlowToComplete()
    monkeypatch.setattr(workers, "WORKERS", pool)
    fake.script("a", Hang(0.3, Reply("first", usage=(5, 3))))
    router = Router(
        [fake_route(fake, m, prices=prices(a="1000", b="1000")) for m in ("a", "b")],
        budget=Budget("5.00"),
        hedge=Hedge(after=0.05),
    )
    expected = DeadlineExceededError if ending == "deadline" else KeyboardInterrupt
    deadline = 3.0 if ending == "deadline" else 30.0  # room for the answer on a busy machine
    pool.past_deadline = time.monotonic() + deadline + 0.3
    # Ctrl-C as Python delivers it by default: an earlier test's library may have set a
    # SIGINT handler of its own for the process (CrewAI's telemetry exits with 0).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(expected) as caught:
            router.route(model="g", messages=ASK, max_tokens=10, deadline=deadline)
    finally:
        signal.signal(signal.SIGINT, previous)
    pool.shutdown(wait=True)  # the first attempt's future has completed and settled
    assert pool.refused.is_set(), str(getattr(caught.value, "journey", ""))
    assert fake.requests("a") == 1 and fake.requests("b") == 0
    spending = router.spending()
    assert spending.in_flight == 0 and spending.reserved.micros == 0
    assert spending.calls == 1 and spending.spent.micros == 8 * 1000  # the answer, by its usage
    if ending == "deadline":
        skipped = [s.reason for s in caught.value.journey.skips if s.route == "openai/b"]
        assert skipped == ["not sent: lost the hedge to openai/a while it waited for a free worker"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_sync_hedged_attempt_is_given_up_at_its_first_token_limit(stream: bool) -> None:
    """A route's first-token limit holds in a sync hedged race as in an async one: an
    attempt silent past it is left (the next route answers), even when the hedge's delay
    has not come. Before, the sync race waited for the silent attempt, which answered
    seconds past its limit."""

    def answer(path: str, body: dict[str, Any]) -> Step:
        if body.get("model") == "slow":
            return Hang(3.0, Reply("from the slow route", usage=(5, 3)))
        return Reply("from the next route", usage=(5, 3))

    with FakeProvider(responder=answer) as fake:
        router = Router(
            [fake_route(fake, "slow", first_token_timeout=0.3), fake_route(fake, "next")],
            hedge=Hedge(after=10.0),
        )
        if stream:
            routed = router.route(model="g", messages=ASK, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in routed.response)
        else:
            routed = router.route(model="g", messages=ASK)
            text = routed.response.choices[0].message.content
        assert (routed.route.name, text) == ("openai/next", "from the next route"), str(routed.journey)
        assert "no first token within 0.3 s" in str(routed.journey)
