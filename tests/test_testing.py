"""FakeProvider itself: a real OpenAI-compatible server whose scripts and counts are exact."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from policy_router.testing import Fail, FakeProvider, Hang, Refuse, Reply, Trickle


def post(
    fake: FakeProvider, body: dict[str, Any], timeout: float = 5
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        f"{fake.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_scripts_play_in_order_then_default(fake: FakeProvider) -> None:
    """Scripted steps are consumed one per request; then the model answers normally."""
    fake.script("m", Fail(429, retry_after=2), Refuse(), Reply("done", usage=(7, 3)))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    status, headers, _ = post(fake, body)
    assert (status, headers["Retry-After"]) == (429, "2")
    status, _, raw = post(fake, body)
    assert status == 400 and json.loads(raw)["error"]["code"] == "content_policy_violation"
    status, _, raw = post(fake, body)
    assert json.loads(raw)["usage"] == {
        "prompt_tokens": 7,
        "completion_tokens": 3,
        "total_tokens": 10,
    }
    status, _, raw = post(fake, body)
    assert json.loads(raw)["choices"][0]["message"]["content"] == "Hello from FakeProvider."
    assert fake.requests("m") == 4 and fake.requests("openai/m") == 4 and fake.requests() == 4


def test_stream_sends_usage_only_when_asked(fake: FakeProvider) -> None:
    """A streamed reply ends with a usage chunk only when stream_options asks for it."""
    body = {"model": "s", "stream": True, "messages": [{"role": "user", "content": "a b"}]}
    _, _, plain = post(fake, body)
    _, _, with_usage = post(fake, {**body, "stream_options": {"include_usage": True}})
    assert b'"usage"' not in plain and plain.endswith(b"data: [DONE]\n\n")
    last = [line for line in with_usage.split(b"\n\n") if line.startswith(b"data: {")][-1]
    assert json.loads(last[6:])["usage"]["prompt_tokens"] == 2


def test_hang_and_trickle_take_the_time_they_say(fake: FakeProvider) -> None:
    """A hang holds the reply back; a trickle spreads it over its gaps."""
    fake.script("h", Hang(0.3), Trickle(pieces=3, gap=0.1))
    body = {"model": "h", "messages": [{"role": "user", "content": "x"}]}
    started = time.monotonic()
    post(fake, body)
    assert time.monotonic() - started >= 0.3
    started = time.monotonic()
    status, _, raw = post(fake, body)
    assert time.monotonic() - started >= 0.2 and status == 200 and json.loads(raw)["choices"]


def test_fake_binds_loopback_only() -> None:
    """The server listens on 127.0.0.1 with a free port and stops cleanly."""
    with FakeProvider() as fake:
        assert fake.base_url.startswith("http://127.0.0.1:")
        with socket.create_connection(("127.0.0.1", fake.port), timeout=2):
            pass
    with pytest.raises(RuntimeError, match="not started"):
        _ = fake.port


def test_a_reply_to_a_request_from_before_a_reset_bills_nothing_after_it(fake: FakeProvider) -> None:
    """A provider still answering an earlier test's request when the next test resets the
    fake: its bill is not counted in the new test's `bills()` (it was, and a later test
    that summed bills failed now and then); without a reset, the same reply is billed."""
    import threading

    def ask() -> None:
        body = json.dumps({"model": "slow", "messages": [{"role": "user", "content": "hi"}]}).encode()
        request = urllib.request.Request(
            f"{fake.base_url}/chat/completions", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    for reset in (False, True):
        fake.script("slow", Hang(0.5))
        asking = threading.Thread(target=ask)
        asking.start()
        deadline = time.monotonic() + 5
        while fake.requests("slow") == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        if reset:
            fake.reset()
        asking.join()
        assert (fake.bills("slow") == []) is reset
        fake.reset()
