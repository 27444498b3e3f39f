"""The reference designs' last rows, end to end against FakeProvider: a Responses answer
served incomplete warns, a Responses failure about the request stops, a retry the deadline
has no room for ends with the deadline's error, each attempt keeps its exception, a route a
live preflight denied says so, a routed stream shows its usage, a retry given only to the
first route or decided by a callable, and a text-completion stream warns that its cut
cannot be seen."""

from __future__ import annotations

import asyncio
import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import litellm
import pytest

from policy_router import (
    Breaker,
    ConfigError,
    DeadlineExceededError,
    IncompleteResponseWarning,
    ResponseFailedError,
    Retry,
    RetryContext,
    Route,
    Router,
    UncheckedStreamWarning,
)
from policy_router.drive import stream_watch
from policy_router.testing import Fail, FakeProvider, Reply, StreamError

from .conftest import KEY_PREFIX, MESSAGES, fake_route

RESPONSES = {"responses": True, "streaming": True}
# Models LiteLLM streams natively on the Responses API (see test_responses_stream).
FIRST, SECOND = "gpt-4o-mini", "gpt-4o"


def _responses_router(fake: FakeProvider, **kw: Any) -> Router:
    return Router(
        [
            Route(f"openai/{m}", group="g", api_base=fake.base_url, api_key=f"{KEY_PREFIX}{m}",
                  capabilities=RESPONSES)
            for m in (FIRST, SECOND)
        ],
        **kw,
    )


# -- 6: Responses, served incomplete or failed about the request ---------------------------
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_whole_responses_answer_served_incomplete_warns_once_naming_why(
    fake: FakeProvider, driver: str
) -> None:
    fake.script(FIRST, Reply(" ".join(["word"] * 40)))
    router = _responses_router(fake)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if driver == "sync":
            response = router.responses(model="g", input="say it", max_output_tokens=16)
        else:
            response = asyncio.run(router.aresponses(model="g", input="say it", max_output_tokens=16))
    told = [w for w in caught if issubclass(w.category, IncompleteResponseWarning)]
    assert len(told) == 1, [str(w.message) for w in caught]
    assert "ended incomplete (max_output_tokens)" in str(told[0].message)
    if driver == "sync":
        assert told[0].filename == __file__  # told at the caller's own line
    assert response.status == "incomplete" and fake.requests() == 1  # served, not retried
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        router.responses(model="g", input="say it")
    assert not [w for w in again if issubclass(w.category, IncompleteResponseWarning)]


@pytest.mark.parametrize("after", [0, 5])
def test_a_responses_failure_about_the_request_stops_with_the_providers_error(
    fake: FakeProvider, after: int
) -> None:
    """`response.failed` with `invalid_prompt`: another model would fail alike, so no other
    route is asked (before the first text or after it), and the breaker is not told."""
    fake.script(FIRST, StreamError(after=after, event="response.failed", code="invalid_prompt",
                                   message="the prompt was flagged as invalid"))
    router = _responses_router(fake, stream_failure="restart", on_restart=lambda _: None)
    with pytest.raises(ResponseFailedError) as raised:
        for _ in router.responses(model="g", input="say it", stream=True):
            pass
    assert raised.value.code == "invalid_prompt"
    assert fake.requests(FIRST) == 1 and fake.requests(SECOND) == 0
    assert raised.value.journey.attempts[-1].outcome == "bad_request"
    assert router.health()[f"openai/{FIRST}"].failures == 0


def test_a_responses_failure_about_the_provider_still_moves_on(fake: FakeProvider) -> None:
    fake.script(FIRST, StreamError(after=0, event="response.failed", code="server_error"))
    router = _responses_router(fake)
    stream = router.responses(model="g", input="say it", stream=True)
    assert list(stream) and stream.text == "Hello from FakeProvider."
    assert stream.journey.answered_by == f"openai/{SECOND}"


# -- 7: a retry wait past the deadline ------------------------------------------------------
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_retry_wait_that_would_pass_the_deadline_ends_with_the_deadline_error(
    fake: FakeProvider, driver: str
) -> None:
    fake.script("only", Fail(503, "busy", retry_after=3))
    router = Router([fake_route(fake, "only")], retry=Retry(attempts=3, max_backoff=5))
    call = dict(model="g", messages=MESSAGES, deadline=1.0)
    with pytest.raises(DeadlineExceededError) as raised:
        if driver == "sync":
            router.completion(**call)
        else:
            asyncio.run(router.acompletion(**call))
    error = raised.value
    assert isinstance(error, litellm.Timeout) and fake.requests() == 1
    assert isinstance(error.__cause__, litellm.ServiceUnavailableError)  # the provider's, kept
    assert "would pass the deadline" in str(error.journey.attempts[0])
    assert "too little time to wait for a retry" in str(error)


def test_a_retry_past_the_deadline_gives_way_to_the_next_route(fake: FakeProvider) -> None:
    fake.script("a", Fail(503, "busy", retry_after=3))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], retry=Retry(max_backoff=5))
    routed = router.route(model="g", messages=MESSAGES, deadline=1.0)
    assert routed.route.name == "openai/b" and fake.requests("a") == 1
    assert routed.journey.attempts[0].then.endswith("would pass the deadline; next route")


# -- 8: each attempt keeps its exception ----------------------------------------------------
def test_each_attempt_keeps_its_exception_scrubbed(fake: FakeProvider) -> None:
    fake.script("a", Fail(429, f"slow down, key {KEY_PREFIX}a"))
    fake.script("b", Fail(500, f"broken, key {KEY_PREFIX}b"))
    router = Router([fake_route(fake, n) for n in ("a", "b", "c")])
    routed = router.route(model="g", messages=MESSAGES)
    first, second, third = routed.journey.attempts
    assert isinstance(first.exception, litellm.RateLimitError) and first.exception.status_code == 429
    assert isinstance(second.exception, litellm.InternalServerError)
    assert second.exception.status_code == 500 and "broken" in str(second.exception)
    for attempt in (first, second):
        assert KEY_PREFIX not in str(attempt.exception) and KEY_PREFIX not in repr(attempt.exception.args)
    assert third.ok and third.exception is None
    assert first == first.__class__(**{**_fields(first), "exception": None})  # not in equality


def _fields(attempt: Any) -> dict[str, Any]:
    return {name: getattr(attempt, name) for name in attempt.__dataclass_fields__}


def test_a_failed_stream_keeps_its_exception(fake: FakeProvider) -> None:
    from policy_router.testing import Cut

    fake.script("a", Cut(after=2, reply=Reply("one two three four")))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")])
    stream = router.completion(model="g", messages=MESSAGES, stream=True)
    with pytest.raises(litellm.exceptions.MidStreamFallbackError):
        for _ in stream:
            pass
    cut = stream.journey.attempts[0]
    assert cut.outcome == "stream_cut" and isinstance(cut.exception, litellm.exceptions.MidStreamFallbackError)


# -- 9: denied at preflight -----------------------------------------------------------------
def test_a_route_a_live_preflight_denied_says_so_in_the_journey_and_health(fake: FakeProvider) -> None:
    fake.script("a", Fail(401, "invalid api key"))
    router = Router([fake_route(fake, "a"), fake_route(fake, "b")], breaker=Breaker(settled=600))
    assert router.preflight(live=True)["openai/a"].state == "denied"
    record = router.health()["openai/a"]
    assert record.state == "open" and record.last_error.startswith("denied at preflight: 401")
    routed = router.route(model="g", messages=MESSAGES)
    skip = routed.journey.skips[0]
    assert skip.route == "openai/a" and "denied at preflight (401" in skip.reason
    assert "failure" not in skip.reason
    assert fake.requests("a") == 1  # the preflight's own request, and none since


# -- 10: a routed stream's usage ------------------------------------------------------------
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_routed_stream_shows_the_providers_usage_once_read(fake: FakeProvider, driver: str) -> None:
    fake.script("a", Reply("one two three", usage=(11, 3)))
    router = Router([fake_route(fake, "a")])
    options = {"stream_options": {"include_usage": True}}

    async def aread() -> Any:
        stream = await router.acompletion(model="g", messages=MESSAGES, stream=True, **options)
        assert stream.usage is None  # not before its chunk arrives
        async for _ in stream:
            pass
        return stream

    if driver == "async":
        stream = asyncio.run(aread())
    else:
        stream = router.completion(model="g", messages=MESSAGES, stream=True, **options)
        assert stream.usage is None
        for _ in stream:
            pass
    assert stream.usage.prompt_tokens == 11 and stream.usage.completion_tokens == 3
    assert stream.usage.total_tokens == 14


def test_a_stream_whose_provider_reported_no_usage_shows_none(fake: FakeProvider) -> None:
    """LiteLLM makes up an estimate when the provider sent none: that is no usage."""
    fake.script("a", Reply("one two three", report_usage="missing"))
    stream = Router([fake_route(fake, "a")]).completion(
        model="g", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    for _ in stream:
        pass
    assert stream.usage is None


# -- 12: retries for the first route only, or decided by a callable -------------------------
def test_retry_routes_first_retries_only_the_first_route_sent_to(fake: FakeProvider) -> None:
    for name in ("a", "b"):
        fake.script(name, Fail(503), Fail(503), Fail(503))
    router = Router(
        [fake_route(fake, n) for n in ("a", "b", "c")],
        retry=Retry(attempts=3, backoff=0.01, routes="first"),
        breaker=None,
    )
    routed = router.route(model="g", messages=MESSAGES)
    assert [a.route for a in routed.journey.attempts] == [
        "openai/a", "openai/a", "openai/a", "openai/b", "openai/c",
    ]
    assert routed.route.name == "openai/c"


def test_a_custom_retry_decision_sees_the_fault_and_decides(fake: FakeProvider) -> None:
    seen: list[RetryContext] = []

    def decide(context: RetryContext) -> bool:
        seen.append(context)
        return context.status == 502

    fake.script("a", Fail(502, f"bad gateway {KEY_PREFIX}a"), Fail(503, "unavailable"))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        retry=Retry(attempts=3, backoff=0.01, decide=decide),
        breaker=None,
    )
    routed = router.route(model="g", messages=MESSAGES)
    assert [a.route for a in routed.journey.attempts] == ["openai/a", "openai/a", "openai/b"]
    assert [(c.route, c.attempt, c.kind, c.status) for c in seen] == [
        ("openai/a", 1, "server_error", 502), ("openai/a", 2, "server_error", 503),
    ]
    assert KEY_PREFIX not in seen[0].error and "bad gateway" in seen[0].error


def test_a_custom_decision_cannot_retry_a_bad_request(fake: FakeProvider) -> None:
    asked: list[RetryContext] = []
    fake.script("a", Fail(400, "malformed"))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        retry=Retry(attempts=3, decide=lambda c: asked.append(c) or True),
    )
    with pytest.raises(litellm.BadRequestError):
        router.completion(model="g", messages=MESSAGES)
    assert asked == [] and fake.requests() == 1


def test_a_decision_that_is_not_exactly_a_bool_is_a_clear_error(fake: FakeProvider) -> None:
    fake.script("a", Fail(503))
    router = Router(
        [fake_route(fake, "a"), fake_route(fake, "b")],
        retry=Retry(attempts=2, decide=lambda c: 1),  # type: ignore[arg-type,return-value]
        breaker=Breaker(failures=1, cooldown=60),
    )
    with pytest.raises(ConfigError, match="must return exactly True"):
        router.completion(model="g", messages=MESSAGES)
    assert fake.requests() == 1 and fake.requests("b") == 0
    assert "openai/a" in router.resting()  # the failure itself was still recorded


@pytest.mark.parametrize(
    ("given", "match"),
    [({"routes": "some"}, "routes must be"), ({"decide": "yes"}, "decide must be a callable")],
)
def test_retry_refuses_bad_settings(given: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        Retry(**given)


# -- 15: a text-completion stream's cut cannot be seen ---------------------------------------
def test_a_text_completion_stream_warns_once_that_its_cut_cannot_be_seen(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream_watch, "_UNCHECKED_TOLD", set())
    router = Router([fake_route(fake, "a", capabilities={"chat": True, "completion": True, "streaming": True})])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            for _ in router.text_completion(model="g", prompt="Once upon", stream=True):
                pass
        for _ in router.completion(model="g", messages=MESSAGES, stream=True):
            pass
    told = [w for w in caught if issubclass(w.category, UncheckedStreamWarning)]
    assert len(told) == 1 and "cannot be told from a clean end" in str(told[0].message)
    assert told[0].filename == __file__


def test_a_policy_file_gives_retries_to_the_first_route_only(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = {"api_base": fake.base_url, "api_key": "os.environ/DOCS_KEY", "capabilities": {"chat": True}}
    config = {
        "retry": {"attempts": 2, "backoff": 0.01, "routes": "first"},
        "breaker": None,
        "groups": {"g": {"routes": [{"model": f"openai/{n}", **route} for n in ("a", "b", "c")]}},
    }
    monkeypatch.setenv("DOCS_KEY", f"{KEY_PREFIX}file")
    for name in ("a", "b"):
        fake.script(name, Fail(503), Fail(503))
    with Router.from_config(config) as router:
        routed = router.route(model="g", messages=MESSAGES)
    assert [a.route for a in routed.journey.attempts] == ["openai/a", "openai/a", "openai/b", "openai/c"]
    bad = {**config, "retry": {"routes": "some"}}
    with pytest.raises(ConfigError, match="routes"):
        Router.from_config(bad)



@contextlib.contextmanager
def _streams_opened() -> Iterator[list[Any]]:
    """The streams LiteLLM hands the router, in order, with the garbage collector off (so a
    stream left unclosed stays open, as it would until a collection runs)."""
    import gc

    from policy_router.drive.seam import transport

    sources: list[Any] = []
    real_send, real_asend = transport.send, transport.asend

    def send(*args: Any) -> Any:
        sources.append(real_send(*args))
        return sources[-1]

    async def asend(*args: Any) -> Any:
        sources.append(await real_asend(*args))
        return sources[-1]

    gc.disable()
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(transport, "send", send)
            patch.setattr(transport, "asend", asend)
            yield sources
    finally:
        gc.enable()


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stream_that_fails_before_its_first_chunk_gives_its_connection_back_at_once(
    fake: FakeProvider, kind: str
) -> None:
    """The first route's Responses stream fails at its first event and the next route
    answers: the failed stream's HTTP response is closed then, not left to the garbage
    collector, which may run inside the HTTP client's own pool lock and deadlock it (seen
    under load). With collection off, the failed route's response is closed all the same."""
    fake.script(FIRST, StreamError(after=0, event="response.failed", code="server_error"))
    router = _responses_router(fake)
    with _streams_opened() as sources:
        if kind == "sync":
            stream = router.responses(model="g", input="say it", stream=True)
            text = "".join(getattr(e, "delta", "") or "" for e in stream)
        else:
            async def read() -> str:
                stream = await router.aresponses(model="g", input="say it", stream=True)
                return "".join([getattr(e, "delta", "") or "" async for e in stream])

            text = asyncio.run(read())
    assert text == "Hello from FakeProvider."
    failed, _answered = sources
    assert failed.response.is_closed


@pytest.mark.parametrize("restart", [False, True])
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stream_that_fails_after_its_first_chunk_gives_its_connection_back_at_once(
    fake: FakeProvider, kind: str, restart: bool
) -> None:
    """A Responses stream fails mid-answer: raised in the stream, or restarted on the next
    route, the failed stream's HTTP response is closed then (collection off), never left for
    the garbage collector to close inside the HTTP client's pool lock."""
    fake.script(FIRST, StreamError(after=2, event="response.failed", code="server_error"))
    extra: dict[str, Any] = {"stream_failure": "restart", "on_restart": lambda _: None} if restart else {}
    router = _responses_router(fake, **extra)

    def read() -> None:
        for _ in router.responses(model="g", input="say it", stream=True):
            pass

    async def aread() -> None:
        async for _ in await router.aresponses(model="g", input="say it", stream=True):
            pass

    with _streams_opened() as sources, contextlib.nullcontext() if restart else pytest.raises(Exception):
        read() if kind == "sync" else asyncio.run(aread())
    assert sources[0].response.is_closed
    assert len(sources) == (2 if restart else 1)
