"""A Responses stream that says it failed (`response.failed`, `error`) raises a typed
error that keeps the event; one that ends `response.incomplete` warns once. Through
LiteLLM's real Responses streaming path (a model LiteLLM streams natively)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import litellm
import pytest

from policy_router import (
    Breaker,
    IncompleteResponseWarning,
    PolicyRouterError,
    ResponseFailedError,
    Route,
    Router,
)
from policy_router.testing import FakeProvider, Reply, StreamError

CAPS = {"responses": True, "streaming": True}
# Models LiteLLM streams natively on the Responses API (an unknown one is faked from a
# whole reply, with no events to fail in).
FIRST, SECOND = "gpt-4o-mini", "gpt-4o"
KEY = "sk-resp-secret-0042"


def _router(fake: FakeProvider, **kw: Any) -> Router:
    return Router(
        [
            Route(f"openai/{FIRST}", group="g", api_base=fake.base_url, api_key=KEY, capabilities=CAPS),
            Route(f"openai/{SECOND}", group="g", api_base=fake.base_url, api_key="sk-resp-other", capabilities=CAPS),
        ],
        **kw,
    )


def _read(router: Router, driver: str, **kwargs: Any) -> tuple[Any, list[Any], BaseException | None]:
    """Read a whole stream; what it raised, if anything."""
    seen: list[Any] = []
    if driver == "async":

        async def go() -> tuple[Any, BaseException | None]:
            stream = await router.aresponses(model="g", input="say it", stream=True, **kwargs)
            try:
                async for event in stream:
                    seen.append(event)
            except Exception as exc:
                return stream, exc
            return stream, None

        stream, error = asyncio.run(go())
        return stream, seen, error
    stream = router.responses(model="g", input="say it", stream=True, **kwargs)
    try:
        for event in stream:
            seen.append(event)
    except Exception as exc:
        return stream, seen, exc
    return stream, seen, None


@pytest.mark.parametrize("driver", ["sync", "async"])
@pytest.mark.parametrize("kind", ["response.failed", "error"])
def test_a_failure_event_mid_stream_raises_a_typed_error_keeping_the_event(
    fake: FakeProvider, driver: str, kind: str
) -> None:
    fake.script(FIRST, StreamError(after=5, event=kind, code="server_error", message=f"overloaded, key {KEY}"))
    router = _router(fake, breaker=Breaker(failures=3, cooldown=60))
    stream, seen, error = _read(router, driver)
    assert isinstance(error, ResponseFailedError) and isinstance(error, PolicyRouterError)
    assert isinstance(error, litellm.ServiceUnavailableError)  # LiteLLM's own class for it
    assert error.event["type"] == kind and error.code == "server_error"
    said = error.event if kind == "error" else error.event["response"]["error"]
    assert said["code"] == "server_error" and said["message"].startswith("overloaded")
    assert stream.text == "Hello" and error.generated_content == "Hello"  # what came before it
    assert seen and kind not in {str(getattr(e, "type", "")) for e in seen}
    # No secret anywhere the caller can read: message, repr, event, notes, LiteLLM's error.
    visible = f"{error}{error!r}{error.event}{getattr(error, '__notes__', '')}{error.provider_error}"
    assert KEY not in visible and "***" in str(error)
    journey = error.journey
    assert [a.outcome for a in journey.attempts] == ["stream_cut"] and fake.requests() == 1
    assert router.health()[f"openai/{FIRST}"].failures == 1  # a failed answer counts


def test_a_failure_event_before_any_text_falls_through_to_the_next_route(fake: FakeProvider) -> None:
    """The first event already says it failed: nothing reached the caller, so the next
    route answers; the journey says why the first did not."""
    fake.script(FIRST, StreamError(after=0, event="error", code="server_error", message="try later"))
    stream, _, error = _read(_router(fake), "sync")
    assert error is None and stream.text == "Hello from FakeProvider."
    first = stream.journey.attempts[0]
    assert first.route == f"openai/{FIRST}" and "said error (server_error): try later" in first.error
    assert stream.journey.answered_by == f"openai/{SECOND}" and fake.requests() == 2


def test_with_restart_a_failed_answer_starts_again_on_the_next_route(fake: FakeProvider) -> None:
    fake.script(FIRST, StreamError(after=5))
    told: list[object] = []
    stream, _, error = _read(_router(fake, stream_failure="restart", on_restart=told.append), "sync")
    assert error is None and stream.restarts == 1 and len(told) == 1
    assert stream.text == "Hello from FakeProvider." and stream.route == f"openai/{SECOND}"


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_an_incomplete_response_warns_once_and_still_ends_well(fake: FakeProvider, driver: str) -> None:
    fake.script(FIRST, Reply(" ".join(["word"] * 40)))
    router = _router(fake, breaker=Breaker(failures=1, cooldown=60))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stream, seen, error = _read(router, driver, max_output_tokens=16)
    told = [w for w in caught if issubclass(w.category, IncompleteResponseWarning)]
    assert error is None and len(told) == 1
    assert "ended incomplete (max_output_tokens)" in str(told[0].message)
    assert str(getattr(seen[-1], "type", "")).endswith("incomplete") or "INCOMPLETE" in str(seen[-1].type)
    assert stream.text.split() == ["word"] * 16
    assert stream.journey.attempts[0].ok and not router.resting()  # not a failure
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        _read(router, driver)  # a complete answer: no warning
    assert not [w for w in again if issubclass(w.category, IncompleteResponseWarning)]


def test_a_chat_stream_error_line_is_raised_as_litellm_raises_it_without_the_key(
    fake: FakeProvider,
) -> None:
    """Chat streams carry no typed failure event: LiteLLM's own exception is raised, its
    `original_exception`'s text scrubbed too."""
    fake.script("m", StreamError(after=2, message=f"chat boom {KEY}"))
    router = Router([Route("openai/m", group="g", api_base=fake.base_url, api_key=KEY, capabilities={"streaming": True})])
    stream = router.completion(model="g", messages=[{"role": "user", "content": "hi"}], stream=True)
    with pytest.raises(litellm.exceptions.MidStreamFallbackError) as raised:
        for _ in stream:
            pass
    assert not isinstance(raised.value, ResponseFailedError)
    assert "chat boom ***" in str(raised.value) and KEY not in str(raised.value)
    assert [a.outcome for a in stream.journey.attempts] == ["stream_cut"]
