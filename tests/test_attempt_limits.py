"""An attempt's own limits (issue 36): a timeout moves on, a first token that does not come
in `first_token_timeout` moves on, a stream silent for `stall_timeout` after its first chunk
is a cut; each inside the request's deadline, none waiting for the socket's read timeout."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import litellm
import pytest

from policy_router import Budget, ConfigError, Retry, Route, Router
from policy_router.testing import FakeProvider, Hang, Reply, Stall

from .conftest import CAPS, fake_route, prices

ASK = [{"role": "user", "content": "hello"}]
TEXT = " ".join(f"w{i}" for i in range(30))
SLOW = 3.0  # longer than any limit below: an attempt that waits it out is a failure


def _ask(router: Router, mode: str, **kw: Any) -> tuple[str, str]:
    """(route, text) of one call in `mode`, read to the end as a caller reads it."""
    if mode == "sync":
        routed = router.route(model="g", messages=ASK, **kw)
        return routed.route.name, routed.response.choices[0].message.content
    if mode == "async":
        routed = asyncio.run(router.aroute(model="g", messages=ASK, **kw))
        return routed.route.name, routed.response.choices[0].message.content
    if mode == "stream":
        stream = router.completion(model="g", messages=ASK, stream=True, **kw)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        return stream.route, text

    async def go() -> tuple[str, str]:
        stream = await router.acompletion(model="g", messages=ASK, stream=True, **kw)
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        return stream.route, "".join(parts)

    return asyncio.run(go())


MODES = ["sync", "async", "stream", "astream"]


@pytest.mark.parametrize("mode", MODES)
def test_a_timeout_moves_on_and_is_not_retried(fake: FakeProvider, mode: str) -> None:
    """`Retry(attempts=3)` does not spend three timeouts on the same route: one, then the
    next route."""
    fake.script("a", Hang(SLOW, Reply(TEXT)))
    router = Router(
        [fake_route(fake, "a", timeout=0.3), fake_route(fake, "b", timeout=0.3)],
        retry=Retry(attempts=3, backoff=0.01),
    )
    started = time.perf_counter()
    route, text = _ask(router, mode)
    assert (route, fake.requests("a"), fake.requests("b")) == ("openai/b", 1, 1) and text
    assert time.perf_counter() - started < SLOW


def test_retrying_a_timeout_is_opt_in(fake: FakeProvider) -> None:
    fake.script("a", Hang(SLOW, Reply(TEXT)), Hang(SLOW, Reply(TEXT)))
    router = Router(
        [fake_route(fake, "a", timeout=0.3), fake_route(fake, "b")],
        retry=Retry(attempts=2, backoff=0.01, on={"timeout", "server_error"}),
    )
    routed = router.route(model="g", messages=ASK)
    assert routed.route.name == "openai/b" and fake.requests("a") == 2
    assert routed.journey.attempts[0].then.startswith("retry in")


@pytest.mark.parametrize("mode", MODES)
def test_a_first_token_limit_moves_on(fake: FakeProvider, mode: str) -> None:
    """The primary would answer after 3 s, within its read timeout of 30 s: with
    `first_token_timeout=0.3` the fallback is asked at 0.3 s and answers."""
    fake.script("a", Hang(SLOW, Reply("late")))
    router = Router([
        fake_route(fake, "a", timeout=30, first_token_timeout=0.3),
        fake_route(fake, "b", timeout=30),
    ])
    started = time.perf_counter()
    route, text = _ask(router, mode)
    assert route == "openai/b" and text and text != "late"
    assert time.perf_counter() - started < SLOW
    assert fake.requests("a") == 1


def test_the_first_token_limit_speaks_in_the_journey(fake: FakeProvider) -> None:
    fake.script("a", Hang(SLOW, Reply("late")))
    router = Router([fake_route(fake, "a", first_token_timeout=0.2), fake_route(fake, "b")])
    routed = router.route(model="g", messages=ASK)
    first = routed.journey.attempts[0]
    assert first.outcome == "timeout" and "0.2 s" in first.error


def test_a_late_answer_after_the_limit_is_still_charged(fake: FakeProvider) -> None:
    """A sync attempt given up at its first-token limit runs on in its worker: when its
    answer comes the budget charges its usage; nothing stays reserved."""
    fake.script("a", Hang(0.6, Reply("late", usage=(10, 20))))
    router = Router(
        [fake_route(fake, m, prices=prices(a="1000", b="1000"), first_token_timeout=0.15) for m in "ab"],
        budget=Budget("5.00"),
    )
    router.route(model="g", messages=ASK, max_tokens=50)
    deadline = time.monotonic() + 10
    while router.spending().in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    spending = router.spending()
    assert spending.in_flight == 0 and spending.calls == 2
    assert spending.spent.micros >= 30 * 1000  # a's 30 tokens at $1 per thousand


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_stall_after_the_first_chunk_is_a_cut_raised_in_the_stream(fake: FakeProvider, mode: str) -> None:
    """Silent for longer than `stall_timeout` after five chunks: the stream raises
    LiteLLM's `MidStreamFallbackError` with the text so far, long before the 30 s read
    timeout, and the route's breaker hears a cut."""
    fake.script("a", Stall(after=5, seconds=SLOW, reply=Reply(TEXT)))
    router = Router([fake_route(fake, "a", timeout=30, stall_timeout=0.3), fake_route(fake, "b")])
    started = time.perf_counter()
    with pytest.raises(litellm.exceptions.MidStreamFallbackError, match=r"0\.3 s"):
        _ask(router, mode)
    assert time.perf_counter() - started < SLOW
    assert router.health()["openai/a"].failures == 1


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_stall_restarts_on_the_next_route_when_asked(fake: FakeProvider, mode: str) -> None:
    fake.script("a", Stall(after=5, seconds=SLOW, reply=Reply(TEXT)))
    restarts: list[Any] = []
    router = Router(
        [fake_route(fake, "a", stall_timeout=0.3), fake_route(fake, "b")],
        stream_failure="restart",
        on_restart=restarts.append,
    )
    started = time.perf_counter()
    route, _ = _ask(router, mode)
    assert route == "openai/b" and len(restarts) == 1
    assert time.perf_counter() - started < SLOW


@pytest.mark.parametrize("mode", MODES)
def test_the_limits_live_inside_the_deadline(fake: FakeProvider, mode: str) -> None:
    """A first-token limit longer than what is left of the deadline: the deadline wins."""
    fake.script("a", Hang(SLOW, Reply()))
    fake.script("b", Hang(SLOW, Reply()))
    router = Router([fake_route(fake, m, first_token_timeout=2.0) for m in "ab"])
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        _ask(router, mode, deadline=0.4)
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize("field", ["first_token_timeout", "stall_timeout"])
@pytest.mark.parametrize("bad", [0, -1, float("inf"), float("nan"), True, "5"])
def test_a_bad_limit_names_its_field(field: str, bad: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        Route("openai/a", capabilities=CAPS, **{field: bad})
