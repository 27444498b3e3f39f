"""Rate limits before the 429: per-route rpm/tpm counted in the store, skipped with a
sentence, settled to the provider's usage, waited for on request, shared through Redis."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy_router import (
    Budget,
    Check,
    ConfigError,
    DeadlineExceededError,
    ManualClock,
    NoRouteError,
    Order,
    PriceTable,
    RateLimitedError,
    RedisStore,
    Route,
    Router,
    Waited,
    Window,
)
from policy_router.state.windows import WINDOW, MemoryWindows
from policy_router.testing import Fail, FakeProvider, Hang, Reply

from ._redis import RedisServer
from .conftest import CAPS, MESSAGES, fake_route


# -- the window on its own ---------------------------------------------------------------------
def test_rpm_counts_a_minute_of_requests_and_says_when_a_slot_frees() -> None:
    clock = ManualClock()
    windows = MemoryWindows(clock)
    assert all(windows.take("a", f"s{i}", 0, 3, None).taken for i in range(3))
    clock.advance(10)
    full = windows.take("a", "s3", 0, 3, None)
    assert not full.taken and full.requests == 3
    assert full.frees_in == pytest.approx(WINDOW - 10)
    clock.advance(WINDOW - 10)
    assert windows.take("a", "s3", 0, 3, None).taken  # the first three have left
    assert windows.windows(["a"])["a"].requests == 1


def test_tpm_counts_tokens_and_frees_room_as_the_oldest_slots_leave() -> None:
    clock = ManualClock()
    windows = MemoryWindows(clock)
    assert windows.take("a", "s1", 60, None, 100).taken
    clock.advance(5)
    assert windows.take("a", "s2", 30, None, 100).taken
    full = windows.take("a", "s3", 40, None, 100)
    # 90 taken; 40 more fit once s1 (60 tokens, taken 5 s ago) leaves.
    assert not full.taken and full.tokens == 90
    assert full.frees_in == pytest.approx(WINDOW - 5)
    never = windows.take("a", "s4", 101, None, 100)
    assert not never.taken and math.isinf(never.frees_in)


def test_a_slot_settles_to_what_was_billed_or_is_given_back_once() -> None:
    windows = MemoryWindows(ManualClock())
    windows.take("a", "s1", 80, None, 100)
    windows.take("a", "s2", 10, None, 100)
    assert windows.windows(["a"])["a"] == Window(requests=2, tokens=90, in_flight=2, frees_in=WINDOW, closed_for=0.0)
    windows.finish("a", "s1", 7)  # the answer billed 7 of the 80 it could have
    windows.finish("a", "s2", None)  # nothing was sent
    windows.finish("a", "s2", 50)  # a replay changes nothing
    assert windows.windows(["a"])["a"] == Window(requests=1, tokens=7, in_flight=0, frees_in=WINDOW, closed_for=0.0)
    assert windows.take("a", "s1", 80, None, 100).taken  # a replayed take adds nothing
    assert windows.windows(["a"])["a"].requests == 1


def test_a_closed_window_takes_nothing_until_the_reset() -> None:
    clock = ManualClock()
    windows = MemoryWindows(clock)
    windows.close_window("a", 5.0)
    closed = windows.take("a", "s1", 0, 100, None)
    assert not closed.taken and closed.closed_for == pytest.approx(5.0)
    clock.advance(5.0)
    assert windows.take("a", "s1", 0, 100, None).taken


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("take"), st.integers(0, 7), st.integers(0, 60)),
        st.tuples(st.just("finish"), st.integers(0, 7), st.one_of(st.none(), st.integers(0, 60))),
        st.tuples(st.just("advance"), st.floats(0, 30), st.just(0)),
    ),
    max_size=60,
)


@given(ops=_ops, rpm=st.one_of(st.none(), st.integers(1, 5)), tpm=st.integers(1, 150))
def test_no_minute_ever_holds_more_than_the_limits(
    ops: list[tuple[str, Any, Any]], rpm: int | None, tpm: int
) -> None:
    """Whatever mix of takes, settles, give-backs and waits: the requests sent in any
    window (slots taken and not given back) never number more than rpm, and a take never
    passes tpm at the moment it is taken."""
    clock = ManualClock()
    windows = MemoryWindows(clock)
    taken: list[tuple[float, str]] = []
    ended: set[str] = set()
    for op, a, b in ops:
        if op == "advance":
            clock.advance(a)
        elif op == "finish":
            windows.finish("r", f"s{a}", b)
            if b is None and f"s{a}" not in ended:
                taken = [(at, s) for at, s in taken if s != f"s{a}"]
            ended.add(f"s{a}")
        else:
            before = windows.windows(["r"])["r"]
            got = windows.take("r", f"s{a}", b, rpm, tpm)
            if got.taken and got.requests > before.requests:
                assert before.tokens + b <= tpm
                taken.append((clock.now(), f"s{a}"))
                recent = [s for at, s in taken if at > clock.now() - WINDOW]
                assert rpm is None or len(recent) <= rpm


# -- routing through the window ----------------------------------------------------------------
def limited(fake: FakeProvider, clock: ManualClock | None = None, **policies: Any) -> Router:
    """Two routes of group g, 3 requests a minute each at the router, and at the provider
    too unless the router runs on a manual clock (the provider's minute is a real one)."""
    for model in ("a", "b"):
        if clock is None:
            fake.limits(model, rpm=3)
    routes = [fake_route(fake, m, rpm=3) for m in ("a", "b")]
    return Router(routes, clock=clock, **policies)


def test_a_full_route_is_skipped_before_sending_and_the_provider_refuses_nothing(
    fake: FakeProvider,
) -> None:
    router = limited(fake)
    answered = Counter(router.route(model="g", messages=MESSAGES).route.name for _ in range(6))
    assert answered == {"openai/a": 3, "openai/b": 3}
    with pytest.raises(RateLimitedError) as caught:
        router.completion(model="g", messages=MESSAGES)
    error = caught.value
    assert isinstance(error, litellm.RateLimitError) and isinstance(error, NoRouteError)
    assert error.status_code == 429 and 0 < error.retry_after <= WINDOW
    skips = error.journey.skips if error.journey else ()
    assert [s.check for s in skips] == [Check.RATE_LIMIT] * 2
    assert "rpm 3 reached; a slot frees in" in skips[0].reason
    assert fake.requests() == 6 and fake.refused() == 0
    assert all(h.failures == 0 for h in router.health().values())  # nothing rests


def test_a_429_on_a_limited_route_closes_its_window_until_the_named_reset(
    fake: FakeProvider,
) -> None:
    clock = ManualClock()
    # No breaker: the window alone says why `a` is passed over.
    router = Router(
        [fake_route(fake, "a", rpm=100), fake_route(fake, "b")], clock=clock, breaker=None
    )
    fake.script("a", Fail(429, retry_after=5))
    first = router.route(model="g", messages=MESSAGES)
    assert first.route.name == "openai/b" and first.journey.attempts[0].route == "openai/a"
    second = router.route(model="g", messages=MESSAGES)
    assert second.route.name == "openai/b"
    assert "the provider's 429 closed its window: 5.0 s more" in second.journey.skips[0].reason
    clock.advance(5)
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/a"
    # The refused request counts: the provider received it.
    assert router.usage()["openai/a"].requests == 2


def test_a_request_never_sent_gives_its_slot_back(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A route whose client cannot be built (no key) never reached the provider: its slot
    is given back, so the next call may still use it."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = Route("openai/a", group="g", api_base=fake.base_url, rpm=1, capabilities=CAPS)
    router = Router([keyless, fake_route(fake, "b", rpm=1)])
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b" and fake.requests("a") == 0
    assert routed.journey.skips[0].check is Check.SEND
    windows = router.usage()
    assert windows["openai/a"].requests == 0 and windows["openai/a"].in_flight == 0
    assert windows["openai/b"].requests == 1 and windows["openai/b"].in_flight == 0


def test_tokens_are_taken_at_the_bound_and_settled_to_the_bill(fake: FakeProvider) -> None:
    fake.limits("a", tpm=150)
    router = Router([fake_route(fake, "a", tpm=150)])
    fake.script("a", Hang(0.5, then=Reply("two words")))
    errors: list[BaseException] = []

    def slow() -> None:
        try:
            router.completion(model="g", messages=MESSAGES, max_tokens=100)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=slow)
    worker.start()
    deadline = time.monotonic() + 5
    while router.usage()["openai/a"].in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    held = router.usage()["openai/a"]
    assert held.tokens >= 100 + 2  # the reply cap and the prompt's bound
    with pytest.raises(RateLimitedError, match=r"tpm 150 reached"):
        router.completion(model="g", messages=MESSAGES, max_tokens=100)
    worker.join()
    assert errors == []
    # Settled to the bill (2 prompt words + 2 reply words): room again for the same call.
    assert router.usage()["openai/a"].tokens == 4
    router.completion(model="g", messages=MESSAGES, max_tokens=100)
    assert fake.refused() == 0 and fake.requests() == 2


def test_a_request_larger_than_tpm_is_refused_for_good(fake: FakeProvider) -> None:
    router = Router([fake_route(fake, "a", tpm=50)])
    with pytest.raises(RateLimitedError, match="more than its tpm of 50") as caught:
        router.completion(model="g", messages=MESSAGES, max_tokens=60)
    assert math.isinf(caught.value.retry_after) and fake.requests() == 0


def test_a_request_with_no_reply_cap_takes_its_prompt_not_the_models_maximum(
    fake: FakeProvider,
) -> None:
    """A provider counts the cap a request sends; LiteLLM's model maximum (16384 for
    gpt-4o-mini) is not sent, so it is not counted: a model_list with tpm 1000 works."""
    route = Route("openai/gpt-4o-mini", group="g", api_base=fake.base_url, api_key="sk-x", tpm=1000)
    router = Router([route])
    router.completion(model="g", messages=MESSAGES)
    assert 0 < router.usage()["openai/gpt-4o-mini"].tokens < 50


# -- waiting for capacity ----------------------------------------------------------------------
def test_wait_for_capacity_waits_for_the_first_slot_and_says_so(fake: FakeProvider) -> None:
    clock = ManualClock()
    router = limited(fake, clock)
    for _ in range(6):
        router.completion(model="g", messages=MESSAGES)
    clock.advance(20)
    routed = router.route(model="g", messages=MESSAGES, wait_for_capacity=True)
    (waited,) = routed.journey.waits
    assert isinstance(waited, Waited) and waited.seconds == pytest.approx(WINDOW - 20)
    assert "rpm 3 reached" in waited.why and "waited 41.00 s for capacity" in str(routed.journey)
    assert fake.refused() == 0


def test_waiting_never_passes_the_deadline(fake: FakeProvider) -> None:
    clock = ManualClock()
    router = limited(fake, clock, wait_for_capacity=True)
    for _ in range(6):
        router.completion(model="g", messages=MESSAGES)
    with pytest.raises(DeadlineExceededError) as caught:
        router.completion(model="g", messages=MESSAGES, deadline=30)
    assert caught.value.elapsed == pytest.approx(30)
    assert caught.value.journey is not None
    assert sum(w.seconds for w in caught.value.journey.waits) == pytest.approx(30)
    assert fake.requests() == 6


def test_a_route_that_cannot_serve_for_another_reason_is_not_waited_for(
    fake: FakeProvider,
) -> None:
    """Waiting is for capacity only: a request larger than tpm is refused at once."""
    router = Router([fake_route(fake, "a", tpm=50)], wait_for_capacity=True)
    with pytest.raises(RateLimitedError):
        router.completion(model="g", messages=MESSAGES, max_tokens=60)


TABLE = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-11-01",
        "source": "tests",
        "models": {"openai/a": {"input": "0", "output": "1.00"}},
    },
    name="t",
)


async def test_async_waiting_and_cancelling_a_wait_holds_nothing(fake: FakeProvider) -> None:
    fake.limits("a", rpm=1)
    route = fake_route(fake, "a", rpm=1, prices=TABLE)
    router = Router([route], wait_for_capacity=True, budget=Budget("1"))
    await router.acompletion(model="g", messages=MESSAGES, max_tokens=5)
    task = asyncio.create_task(router.acompletion(model="g", messages=MESSAGES, max_tokens=5))
    await asyncio.sleep(0.2)
    assert not task.done()  # waiting for the minute to pass
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    window = router.usage()["openai/a"]
    assert (window.requests, window.in_flight) == (1, 0)
    spending = router.spending()
    assert spending.reserved.micros == 0 and spending.in_flight == 0
    assert fake.requests() == 1 and fake.refused() == 0


def test_a_budget_held_by_calls_in_flight_is_waited_for(fake: FakeProvider) -> None:
    route = fake_route(fake, "a", prices=TABLE)
    # Room for one call of 100 output tokens: the second waits until the first settles.
    router = Router([route], budget=Budget("0.00015"), wait_for_capacity=True)
    fake.script("a", Hang(0.4, then=Reply("one")), Reply("two"))
    results: list[Any] = []
    first = threading.Thread(
        target=lambda: results.append(router.route(model="g", messages=MESSAGES, max_tokens=100))
    )
    first.start()
    time.sleep(0.1)
    second = router.route(model="g", messages=MESSAGES, max_tokens=100, deadline=5)
    first.join()
    assert second.journey.waits and "held by 1 call in flight" in second.journey.waits[0].why
    assert router.spending().spent.micros <= 150
    assert fake.requests() == 2


# -- orderings ---------------------------------------------------------------------------------
def test_least_busy_sends_to_the_route_with_fewest_calls_in_flight(fake: FakeProvider) -> None:
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], order=Order.LEAST_BUSY)
    fake.script("a", Hang(0.5))
    slow = threading.Thread(target=router.completion, kwargs={"model": "g", "messages": MESSAGES})
    slow.start()
    deadline = time.monotonic() + 5
    while router.usage()["openai/a"].in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/b"
    slow.join()
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/a"  # ties: listed


def test_most_headroom_sends_to_the_route_with_most_of_its_minute_left(fake: FakeProvider) -> None:
    clock = ManualClock()
    a, b = fake_route(fake, "a", rpm=4), fake_route(fake, "b", rpm=100)
    router = Router([a, b], order=Order.MOST_HEADROOM, clock=clock)
    sent = [router.route(model="g", messages=MESSAGES).route.name for _ in range(4)]
    # b keeps more than 3/4 of its minute, a has 4, 3, 2... of 4 left after each call.
    assert sent == ["openai/a", "openai/b", "openai/b", "openai/b"]
    explanation = router.explain(model="g", messages=MESSAGES)
    assert [v.route for v in explanation.verdicts] == ["openai/b", "openai/a"]


def test_explain_shows_each_window_and_marks_a_full_one(fake: FakeProvider) -> None:
    router = limited(fake)
    for _ in range(4):
        router.completion(model="g", messages=MESSAGES)
    verdicts = {v.route: v for v in router.explain(model="g", messages=MESSAGES).verdicts}
    assert (
        verdicts["openai/a"].check is Check.RATE_LIMIT and "rpm 3/3" in verdicts["openai/a"].reason
    )
    assert verdicts["openai/b"].check is None and "rpm 1/3" in verdicts["openai/b"].reason
    assert fake.requests() == 4  # explain sent nothing and took no slot
    assert router.usage()["openai/b"].requests == 1


# -- configuration -----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "60"])
def test_a_limit_must_be_a_whole_number(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"\.rpm must be a whole number >= 1"):
        Route("openai/a", rpm=bad)
    with pytest.raises(ConfigError, match=r"\.tpm must be a whole number >= 1"):
        Route("openai/a", tpm=bad)


def test_a_litellm_model_list_brings_its_limits(fake: FakeProvider) -> None:
    model_list = [
        {
            "model_name": "gpt",
            "litellm_params": {"model": "openai/a", "api_base": fake.base_url, "rpm": 2},
            "tpm": 5000,
        },
        {"model_name": "gpt", "rpm": 7, "litellm_params": {"model": "openai/b"}},
    ]
    router = Router.from_litellm_model_list(model_list)
    a, b = router.routes
    assert (a.rpm, a.tpm, b.rpm, b.tpm) == (2, 5000, 7, None)
    assert "rpm=2" in repr(a) and "tpm=5000" in repr(a)


def test_the_config_file_takes_limits(
    tmp_path: Any, fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KEY", "sk-x")
    path = tmp_path / "policy.yaml"
    path.write_text(
        f"""
groups:
  g:
    order: least_busy
    routes:
      - model: openai/a
        api_base: {fake.base_url}
        api_key: os.environ/FAKE_KEY
        capabilities: {{streaming: true}}
        rpm: 1
        tpm: 200000
wait_for_capacity: true
deadline: 5
"""
    )
    router = Router.from_config(path, clock=ManualClock())
    (route,) = router.routes
    assert (route.rpm, route.tpm) == (1, 200000)
    router.completion(model="g", messages=MESSAGES)
    # wait_for_capacity from the file: the second call waits (on the manual clock) to its
    # deadline rather than being refused at once.
    with pytest.raises(DeadlineExceededError):
        router.completion(model="g", messages=MESSAGES)


def test_a_litellm_proxy_config_with_usage_based_routing_orders_by_headroom(
    fake: FakeProvider, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LiteLLM's `usage-based-routing-v2` over deployments with rpm is MOST_HEADROOM here,
    and the limits hold: the provider enforcing them answers no 429."""
    monkeypatch.setenv("FAKE_KEY", "sk-x")
    path = tmp_path / "config.yaml"
    deployments = "".join(
        f"""
  - model_name: gpt
    rpm: {rpm}
    litellm_params:
      model: openai/{m}
      api_base: {fake.base_url}
      api_key: os.environ/FAKE_KEY
    model_info: {{supports_function_calling: true}}"""
        for m, rpm in (("a", 2), ("b", 4))
    )
    path.write_text(
        f"model_list:{deployments}\nrouter_settings:\n  routing_strategy: usage-based-routing-v2\n"
    )
    fake.limits("a", rpm=2)
    fake.limits("b", rpm=4)
    router = Router.from_config(path)
    sent = [router.route(model="gpt", messages=MESSAGES).route.name for _ in range(6)]
    assert Counter(sent) == {"openai/a": 2, "openai/b": 4}
    assert sent[:2] == ["openai/a", "openai/b"]  # a: 2 of 2 left; then b's 4/4 beats a's 1/2
    with pytest.raises(RateLimitedError):
        router.completion(model="gpt", messages=MESSAGES)
    assert fake.refused() == 0


# -- the generated class: whatever a caller sends, the provider never answers 429 --------------
_calls = st.lists(
    st.fixed_dictionaries(
        {
            "words": st.integers(1, 30),
            "max_tokens": st.one_of(st.none(), st.integers(1, 40)),
            "n": st.one_of(st.none(), st.integers(1, 3)),
            "reply": st.integers(1, 60),
            "stream": st.booleans(),
        }
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(calls=_calls, rpm=st.integers(1, 6), tpm=st.integers(40, 400))
def test_the_provider_never_refuses_what_the_router_sent(
    fake: FakeProvider, calls: list[dict[str, Any]], rpm: int, tpm: int
) -> None:
    """Requests of any size, n, cap and stream, under any rpm/tpm the provider enforces:
    every call is answered or refused before sending; the provider refuses none; it
    received exactly the attempts the journeys record; no route rests."""
    fake.reset()
    fake.limits("a", rpm=rpm, tpm=tpm)
    router = Router([fake_route(fake, "a", rpm=rpm, tpm=tpm)])
    attempts = 0
    for call in calls:
        fake.script("a", Reply(" ".join(["w"] * call["reply"])))
        kwargs: dict[str, Any] = {
            "messages": [{"role": "user", "content": " ".join(["x"] * call["words"])}]
        }
        kwargs.update({k: call[k] for k in ("max_tokens", "n") if call[k] is not None})
        try:
            if call["stream"]:
                stream = router.completion(model="g", stream=True, **kwargs)
                "".join(c.choices[0].delta.content or "" for c in stream)
                attempts += len(stream.journey.attempts)
            else:
                attempts += router.route(model="g", **kwargs).attempts
        except RateLimitedError as refused:
            assert refused.journey is not None and not refused.journey.attempts
    assert fake.refused() == 0
    assert fake.requests() == attempts
    assert router.resting() == {}
    assert router.usage()["openai/a"].in_flight == 0


# -- shared through Redis ----------------------------------------------------------------------
@pytest.fixture
def url(redis_server: RedisServer) -> Iterator[str]:
    yield redis_server.url
    RedisStore(redis_server.url, namespace="policy_router:limits").clear()


def shared(url: str, fake: FakeProvider, **policies: Any) -> Router:
    routes = [fake_route(fake, m, rpm=3) for m in ("a", "b")]
    return Router(routes, name="limits", store=RedisStore(url), **policies)


def test_routers_sharing_redis_share_one_window(url: str, fake: FakeProvider) -> None:
    for model in ("a", "b"):
        fake.limits(model, rpm=3)
    one, two = shared(url, fake), shared(url, fake)
    for router in (one, two, one, two, one, two):
        router.completion(model="g", messages=MESSAGES)
    with pytest.raises(RateLimitedError):
        two.completion(model="g", messages=MESSAGES)
    assert fake.refused() == 0
    assert {r: (w.requests, w.in_flight) for r, w in one.usage().items()} == {
        "openai/a": (3, 0),
        "openai/b": (3, 0),
    }


async def test_async_calls_share_the_window_through_redis(url: str, fake: FakeProvider) -> None:
    router = shared(url, fake)
    outcomes = await asyncio.gather(
        *(router.acompletion(model="g", messages=MESSAGES) for _ in range(8)),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, RateLimitedError)]
    assert len(refused) == 2 and len(outcomes) - len(refused) == 6
    assert fake.requests() == 6


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("take"), st.integers(0, 7), st.integers(0, 60)),
            st.tuples(
                st.just("finish"), st.integers(0, 7), st.one_of(st.none(), st.integers(0, 60))
            ),
            st.tuples(st.just("close"), st.just(0), st.just(0)),
        ),
        max_size=30,
    ),
    rpm=st.one_of(st.none(), st.integers(1, 5)),
    tpm=st.one_of(st.none(), st.integers(1, 150)),
)
def test_redis_windows_decide_as_the_in_process_windows_do(
    redis_server: RedisServer,
    ops: list[tuple[str, int, int | None]],
    rpm: int | None,
    tpm: int | None,
) -> None:
    """The Lua scripts and the TTL caches are two implementations of one window: within a
    minute, the same takes, settles, give-backs and closes get the same answers."""
    store = RedisStore(redis_server.url, namespace=f"policy_router:diff-{time.monotonic_ns()}")
    memory = MemoryWindows(ManualClock())
    try:
        for op, slot, value in ops:
            if op == "take":
                got = [s.take("r", f"s{slot}", value or 0, rpm, tpm) for s in (store, memory)]
                assert got[0].taken == got[1].taken
                assert math.isinf(got[0].frees_in) == math.isinf(got[1].frees_in)
            elif op == "finish":
                store.finish("r", f"s{slot}", value)
                memory.finish("r", f"s{slot}", value)
            else:
                store.close_window("r", 30.0)
                memory.close_window("r", 30.0)
            seen = [s.windows(["r"])["r"] for s in (store, memory)]
            assert [(w.requests, w.tokens, w.in_flight) for w in seen] == [
                (seen[1].requests, seen[1].tokens, seen[1].in_flight)
            ] * 2
            assert (seen[0].closed_for > 0) == (seen[1].closed_for > 0)
    finally:
        store.clear()


# -- the store's faults: the fault matrix's rate-limit cells -----------------------------------
# A router's call takes its slot in its admission and finishes it in its settlement.
ADMIT, CONCLUDE = b"policy_router: admit", b"policy_router: conclude"


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[Any]:
    from ._proxy import FaultProxy

    with FaultProxy(redis_server.port) as p:
        yield p


def through(proxy_url: str, fake: FakeProvider, **policies: Any) -> tuple[Router, RedisStore]:
    store = RedisStore(
        proxy_url,
        namespace=f"policy_router:rl-{time.monotonic_ns()}",
        timeout=0.5,
        retry_every=0.05,
    )
    routes = [fake_route(fake, "a", rpm=2), fake_route(fake, "b")]
    return Router(routes, store=store, **policies), store


def test_a_take_whose_reply_is_lost_leaves_no_slot_behind(fake: FakeProvider, proxy: Any) -> None:
    """Redis takes the slot and the reply is lost (twice: the client's retry too): the
    limit fails closed (route a skipped, b answers), and the slot is given back by id once
    Redis is reached again, so the window is not left short."""
    router, store = through(proxy.url, fake)
    proxy.lose(ADMIT, times=2)
    routed = router.route(model="g", messages=MESSAGES)
    assert routed.route.name == "openai/b" and fake.requests("a") == 0
    assert "rate window store unreachable" in routed.journey.skips[0].reason
    time.sleep(0.06)  # past retry_every: the next contact replays the give-back first
    router.usage()
    assert store.pending_writes == 0
    assert router.usage()["openai/a"].requests == 0


def test_a_take_lost_once_is_retried_by_the_same_id_and_counted_once(
    fake: FakeProvider, proxy: Any
) -> None:
    router, _ = through(proxy.url, fake)
    proxy.lose(ADMIT, times=1)
    proxy.lose(CONCLUDE, times=1)
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/a"
    assert proxy.lost == 2
    assert router.route(model="g", messages=MESSAGES).route.name == "openai/a"
    routed = router.route(model="g", messages=MESSAGES)  # rpm 2 reached: b answers
    assert routed.route.name == "openai/b" and "rpm 2 reached" in routed.journey.skips[0].reason
    assert router.usage()["openai/a"].requests == 2 and fake.requests("a") == 2


def test_an_unreachable_store_fails_the_limit_closed_but_not_an_unlimited_route(
    fake: FakeProvider, proxy: Any
) -> None:
    """Redis hangs: a limited route cannot be counted, so it is skipped; an unlimited one
    counted only for LEAST_BUSY still answers."""
    router, _ = through(proxy.url, fake, order=Order.LEAST_BUSY)
    proxy.hang()
    try:
        routed = router.route(model="g", messages=MESSAGES)
    finally:
        proxy.heal()
    assert routed.route.name == "openai/b" and fake.requests("a") == 0
    assert routed.journey.skips[0].check is Check.RATE_LIMIT


# -- the burst: 120 calls over two routes of rpm 30, zero 429s ---------------------------------
def test_a_burst_across_threads_gets_no_429(fake: FakeProvider) -> None:
    from concurrent.futures import ThreadPoolExecutor

    for model in ("a", "b"):
        fake.limits(model, rpm=30)
    router = Router([fake_route(fake, m, rpm=30) for m in ("a", "b")])

    def one(_: int) -> str:
        try:
            router.completion(model="g", messages=MESSAGES)
            return "answered"
        except RateLimitedError:
            return "refused"

    with ThreadPoolExecutor(16) as pool:
        ended = Counter(pool.map(one, range(120)))
    assert ended == {"answered": 60, "refused": 60}
    assert fake.refused() == 0 and fake.requests() == 60


@pytest.fixture(scope="module")
def processes() -> Any:
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["litellm", "policy_router", "tests._redis_worker"])
    return context


@pytest.fixture
def burst_url(redis_server: RedisServer) -> Iterator[str]:
    RedisStore(redis_server.url, namespace="policy_router:limits-burst").clear()
    yield redis_server.url
    RedisStore(redis_server.url, namespace="policy_router:limits-burst").clear()


@pytest.mark.slow
@pytest.mark.parametrize("wait", [False, True], ids=["refuse", "wait-within-deadline"])
def test_a_burst_across_four_processes_through_redis_gets_no_429(
    burst_url: str, fake: FakeProvider, processes: Any, wait: bool
) -> None:
    """4 processes x 30 async calls, two routes of rpm 30 shared through Redis: at most 60
    are sent, the rest refused before sending or (waiting for capacity) ended at their 2 s
    deadline. The provider, enforcing the same rpm, answers no 429, and received exactly
    the requests the journeys record. How many are sent before their deadline depends on
    how busy the machine is, so only what the promise guarantees is asserted: never more
    than the windows allow, no 429, journeys == requests."""
    from ._redis_worker import rate_burst

    for model in ("a", "b"):
        fake.limits(model, rpm=30)
    kwargs = {"wait_for_capacity": True, "deadline": 2.0} if wait else {}
    with processes.Pool(4) as pool:
        barrier = processes.Manager().Barrier(4)
        results = pool.starmap(
            rate_burst, [(burst_url, fake.base_url, 30, 30, barrier, kwargs)] * 4
        )
    ended = sum(results, Counter())
    # A Counter sum drops a zero: on a machine busy enough, no call was sent in time.
    sent = ended.pop("sent", 0)
    assert sum(ended.values()) == 120
    if wait:
        assert sent <= 60 and ended["answered"] <= sent
        # A window the store cannot answer in time fails closed: that call is refused at
        # once, nothing sent (on a busy machine Redis may be that slow).
        assert set(ended) <= {"answered", "deadline", "refused"}
        # An attempt cut by its deadline while in flight is counted (and charged) as sent;
        # on a busy machine it may never have arrived: the provider saw at most the attempts.
        assert fake.refused() == 0 and ended["answered"] <= fake.requests() <= sent
    else:  # nothing waits: every call is decided at once, 60 slots for 120 calls
        # A window the store cannot answer in time fails closed (refused, nothing sent), so
        # on a busy machine fewer than 60 may be sent; never more, and every one answered.
        assert set(ended) <= {"answered", "refused"} and ended["refused"] >= 60
        assert sent <= 60 and ended["answered"] == sent
        assert fake.refused() == 0 and fake.requests() == sent


# -- observed ----------------------------------------------------------------------------------
def test_the_log_lines_and_the_attempt_log_carry_the_skip_reasons(
    fake: FakeProvider, tmp_path: Any
) -> None:
    from loguru import logger

    from policy_router import AttemptLog, read_attempts, read_skips

    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="DEBUG")
    path = tmp_path / "attempts.sqlite"
    clock = ManualClock()
    router = limited(fake, clock, observers=[AttemptLog(path)])
    for _ in range(6):
        router.completion(model="g", messages=MESSAGES)
    routed = router.route(model="g", messages=MESSAGES, wait_for_capacity=True)
    logger.remove(sink)
    skips = read_skips(path)  # calls 4 to 6 passed over a; the waiting call both routes
    assert [s["route"] for s in skips] == ["openai/a"] * 3 + ["openai/a", "openai/b"]
    assert {s["check_name"] for s in skips} == {"rate_limit"}
    assert {s["journey_id"] for s in skips[3:]} == {routed.journey.id}
    assert all("rpm 3 reached; a slot frees in" in s["reason"] for s in skips[3:])
    assert len(read_attempts(path)) == fake.requests() == 7
    mine = [line for line in lines if routed.journey.id in line]
    assert any("skipped openai/a (rpm 3 reached" in line for line in mine)
    assert any("waited 61.00 s for capacity" in line for line in mine)
