"""A stream its caller closes before its end is no success (issue 38): observers, the
attempt log's report and the metrics store record it as closed, neither a success nor a
failure, and `Order.SCORE`'s history holds nothing of it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import litellm
import pytest

from policy_router import AttemptLog, Budget, Money, Router, SQLiteMetrics
from policy_router.core.journey import Attempt
from policy_router.testing import FakeProvider, Reply

from .conftest import MESSAGES, fake_route, prices

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


def _read(router: Router, mode: str) -> Any:
    """A chat stream read to its end, sync or async; the stream."""
    if mode == "sync":
        stream = router.completion(model="g", messages=MESSAGES, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    else:
        async def read() -> tuple[Any, str]:
            found = await router.acompletion(model="g", messages=MESSAGES, stream=True)
            parts = [c.choices[0].delta.content or "" async for c in found if c.choices]
            return found, "".join(parts)

        stream, text = asyncio.run(read())
    assert text.split() == TEXT.split()
    return stream


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_chat_stream_is_whole_at_its_usage_chunk_and_assembled_once(
    fake: FakeProvider, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no LiteLLM callback or cache to tell, a chat stream ends at its usage chunk:
    settled at the provider's usage (nothing in flight), and LiteLLM assembles the answer
    once, where reading on to LiteLLM's end assembles it again (~3 ms of CPU a stream)."""
    built: list[int] = []
    real = litellm.stream_chunk_builder
    monkeypatch.setattr(litellm, "stream_chunk_builder", lambda *a, **k: (built.append(1), real(*a, **k))[1])
    router = Router([fake_route(fake, "a", prices=prices(a="1000"))], budget=Budget("5.00"))
    fake.script("a", Reply(TEXT, usage=(7, 40)))
    stream = _read(router, mode)
    assert built == [1]
    spending = router.spending()
    assert spending.in_flight == 0 and spending.is_exact
    assert spending.spent == stream.journey.cost == Money.parse("0.047", "USD")
    assert (stream.usage.prompt_tokens, stream.usage.completion_tokens) == (7, 40)
    router.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_litellm_callback_still_hears_a_streams_end(fake: FakeProvider, mode: str) -> None:
    """A LiteLLM callback is told of a routed stream's success, as of any call: with one
    registered the stream is read to LiteLLM's own end."""
    from litellm.integrations.custom_logger import CustomLogger

    heard: list[str] = []

    def hear(response: Any) -> None:
        heard.append(response.choices[0].message.content)

    class Heard(CustomLogger):  # type: ignore[misc]
        def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            hear(response_obj)

        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            hear(response_obj)

    # LiteLLM copies a callback into its own lists at a call: each list is put back after.
    lists = ("callbacks", "success_callback", "_async_success_callback", "failure_callback", "_async_failure_callback")
    old = {name: list(getattr(litellm, name)) for name in lists}
    litellm.callbacks = [Heard()]
    try:
        router = Router([fake_route(fake, "a", prices=prices(a="1000"))], budget=Budget("5.00"))
        fake.script("a", Reply(TEXT, usage=(7, 40)))
        if mode == "sync":
            _read(router, mode)
            deadline = time.monotonic() + 10  # LiteLLM tells its callbacks after the stream ends
            while TEXT not in heard and time.monotonic() < deadline:
                time.sleep(0.02)
        else:
            async def read_and_wait() -> None:
                stream = await router.acompletion(model="g", messages=MESSAGES, stream=True)
                assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == TEXT
                for _ in range(500):  # LiteLLM tells its callbacks on tasks of this loop
                    if TEXT in heard:
                        return
                    await asyncio.sleep(0.02)

            asyncio.run(read_and_wait())
        assert TEXT in heard
        assert router.spending().in_flight == 0
        router.close()
    finally:
        for name, kept in old.items():
            setattr(litellm, name, kept)
