"""`policy-router serve` against hostile and careless clients: a real server process on
loopback, the official openai SDK (or a raw socket, where the SDK would not send it) as the
client. No tenant reaches another's state; no input gives a 500 or keeps money reserved; a
body is bounded; every refusal carries the status and retry advice a client acts on; a
client that leaves, or an SDK that retries, costs the providers nothing extra; the process
starts, stops and names its routes as an operator expects."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import openai
import pytest
import yaml

from policy_router.testing import Fail, FakeProvider, Hang

from .conftest import KEY_PREFIX
from .test_server import LOCAL_ONLY, MESSAGES, ROOT, SOLO, TEAM, _free_port, client, policy, served

EMB_ONLY, TIGHT = "sk-emb-only-key-4", "sk-tight-key-5"


def hostile_policy(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    """The server tests' policy, plus a key that may call only `emb`, a route named beyond
    Latin-1, a 1 MiB body limit and a one-second shutdown grace."""
    data = policy(fake, breaker=False, **extra)
    # Room for the continued responses FakeProvider bills as a long stored conversation
    # (a call with no finite bound may pass a cap: `Spending.overshoot_possible`).
    data["budget"] = {"cap": "1000.00"}
    data["groups"]["fancy"] = {"routes": [{
        "model": "openai/cloud", "name": "cloud — primary", "api_base": fake.base_url,
        "api_key": "os.environ/PROVIDER_KEY", "prices": "mine", "reach": "vendor",
        "capabilities": {"tools": True, "streaming": True},
    }]}
    data["server"]["keys"]["emb-only"] = {"key": "os.environ/EMB_KEY", "groups": ["emb"]}
    data["server"]["keys"]["tight"] = {"key": "os.environ/TIGHT_KEY", "budget": {"cap": "0.06"}}
    data["server"]["max_body_mb"] = 1
    data["server"]["shutdown_grace"] = 1
    return data


@pytest.fixture(scope="module")
def hostile(_fake_server: FakeProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    os.environ["EMB_KEY"], os.environ["TIGHT_KEY"] = EMB_ONLY, TIGHT
    with served(tmp_path_factory.mktemp("hostile"), hostile_policy(_fake_server)) as running:
        yield running


def root(base: str) -> str:
    return base[: -len("/v1")]


def spend(base: str, key: str = SOLO) -> dict[str, Any]:
    """The key's account as `/health` shows it."""
    found: dict[str, Any] = httpx.get(f"{root(base)}/health", headers={"Authorization": f"Bearer {key}"}, timeout=10).json()["key"]
    return found


def post(base: str, path: str, body: Any = None, *, key: str = SOLO, raw: bytes | None = None) -> httpx.Response:
    return httpx.post(
        f"{base}{path}", json=body if raw is None else None, content=raw,
        headers={"Authorization": f"Bearer {key}", "content-type": "application/json"}, timeout=30,
    )


# -- 1. tenants reach only their own state -----------------------------------------------

def test_a_stored_response_answers_only_the_key_that_made_it(fake: FakeProvider, hostile: tuple[str, list[str]]) -> None:
    """A response (whole or streamed) made under one key is continued by that key; another
    key naming it gets OpenAI's 404 for an unknown id and nothing is sent, as does any key
    naming an id the server never handed out (a conversation included)."""
    base, _ = hostile
    mine, theirs = client(base, TEAM), client(base, SOLO)
    first = mine.responses.create(model="smart", input="Remember 7.")
    streamed = [e for e in mine.responses.create(model="smart", input="Remember 8.", stream=True)]
    made = {first.id, streamed[0].response.id}  # type: ignore[union-attr]
    sent = fake.requests()
    for previous in made:
        with pytest.raises(openai.NotFoundError) as refused:
            theirs.responses.create(model="smart", input="What was it?", previous_response_id=previous)
        assert refused.value.code == "previous_response_not_found"
        assert previous in refused.value.message
    for unknown in ({"previous_response_id": "resp_made_elsewhere"}, {"conversation": "conv_someone_elses"}):
        with pytest.raises(openai.NotFoundError):
            mine.responses.create(model="smart", input="Go on.", **unknown)  # type: ignore[arg-type]
    assert fake.requests() == sent
    answer = mine.responses.create(model="smart", input="What was it?", previous_response_id=first.id)
    assert answer.output_text and fake.requests() == sent + 1


# -- 2. keys that are not what they seem ---------------------------------------------------

def _app(fake: FakeProvider, env: dict[str, str], **keys: Any) -> Any:
    from policy_router.server import create_app

    data = policy(fake)
    data["server"]["keys"] = keys
    return create_app(data, env=env)


def test_a_key_variable_that_is_empty_or_shared_by_two_tenants_is_refused_at_start(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty key (which would let an empty Authorization in) is refused naming its
    variable; one key given to two tenants is refused naming both."""
    from policy_router import ConfigError

    monkeypatch.setenv("PROVIDER_KEY", f"{KEY_PREFIX}provider")
    monkeypatch.setenv("A_KEY", "")
    with pytest.raises(ConfigError, match="A_KEY"):
        _app(fake, {}, a={"key": "os.environ/A_KEY"})
    with pytest.raises(ConfigError, match="POLICY_ROUTER_API_KEY"):
        _app(fake, {"POLICY_ROUTER_API_KEY": " "}, a={"key_sha256": "0" * 64})
    monkeypatch.setenv("A_KEY", "sk-same")
    with pytest.raises(ConfigError, match="'a' and 'default'"):
        _app(fake, {"POLICY_ROUTER_API_KEY": "sk-same"}, a={"key": "os.environ/A_KEY"})
    monkeypatch.setenv("B_KEY", "sk-same")
    with pytest.raises(ConfigError, match="'a' and 'b'"):
        _app(fake, {}, a={"key": "os.environ/A_KEY"}, b={"key": "os.environ/B_KEY"})


def test_a_key_read_with_a_trailing_newline_is_stripped_and_said(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key variable made from a file (a newline at its end) works as the key without it,
    and the start says so naming the variable; a non-breaking space is no key at all."""
    from starlette.testclient import TestClient

    monkeypatch.setenv("PROVIDER_KEY", f"{KEY_PREFIX}provider")
    monkeypatch.setenv("A_KEY", "sk-from-a-file\n")
    with pytest.warns(UserWarning, match="A_KEY"):
        app = _app(fake, {}, a={"key": "os.environ/A_KEY"})
    with TestClient(app) as http:
        assert http.get("/v1/models", headers={"Authorization": "Bearer sk-from-a-file"}).status_code == 200
        for odd in ("Bearer \u00a0", "Bearer ", "Bearer sk-from-a-file\u00a0"):
            refused = http.get("/v1/models", headers={"Authorization": odd.encode("latin-1")})  # type: ignore[dict-item]
            assert refused.status_code == 401, odd


# -- 3. no input gives a 500, none keeps money ------------------------------------------

MALFORMED: list[tuple[str, bytes | dict[str, Any], str]] = [
    ("/chat/completions", ("[" * 100_000 + "]" * 100_000).encode(), "nested deeper"),
    ("/chat/completions", b'{"model": "smart", "messages": [{"role": "user", "content": "hi"}], "policy_router": {"deadline": 1' + b"0" * 400 + b"}}", "policy_router.deadline"),
    ("/chat/completions", {"model": "smart", "messages": MESSAGES, "policy_router": {"needs": [{}]}}, "needs"),
    ("/chat/completions", {"model": "smart", "messages": MESSAGES, "policy_router": {"needs": 5}}, "needs"),
    ("/chat/completions", {"model": "smart", "messages": MESSAGES, "metadata": "x"}, "metadata"),
    ("/chat/completions", {"model": "smart", "messages": MESSAGES, "stream_options": 5}, "stream_options"),
    ("/chat/completions", {"model": "smart", "messages": [5]}, "messages[0]"),
    ("/embeddings", {"model": "emb", "input": {"a": 1}}, "input"),
    ("/responses", {"model": "smart", "input": "hi", "text": 5}, "text"),
    ("/chat/completions", b"\xff\xfe not json", "not JSON"),
]


@pytest.mark.parametrize(("path", "body", "named"), MALFORMED, ids=[m[2] for m in MALFORMED])
def test_a_malformed_request_is_a_400_naming_its_field_and_holds_nothing(
    fake: FakeProvider, hostile: tuple[str, list[str]], path: str, body: bytes | dict[str, Any], named: str
) -> None:
    base, _ = hostile
    before = spend(base)
    reply = post(base, path, raw=body) if isinstance(body, bytes) else post(base, path, body)
    assert reply.status_code == 400, reply.text
    assert named in reply.json()["error"]["message"]
    after = spend(base)
    assert after["in_flight"] == 0 and after["reserved"] == "0.000000" and after["spent"] == before["spent"]
    assert fake.requests() == 0


# -- 4. a body is bounded ------------------------------------------------------------------

def test_a_body_past_the_limit_is_a_413_as_soon_as_it_is_announced_or_read(fake: FakeProvider, hostile: tuple[str, list[str]]) -> None:
    """Announced (Content-Length 10 GB, the body never sent) it is refused at once;
    chunked, as the read passes the limit; one under the limit is served."""
    base, _ = hostile
    port = int(base.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + SOLO.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: 10000000000\r\n\r\n{"
        )
        head = sock.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 413"), head

    def chunks() -> Iterator[bytes]:
        yield b'{"model": "smart", "messages": [{"role": "user", "content": "'
        for _ in range(40):
            yield b"x" * 65536
        yield b'"}]}'

    refused = httpx.post(f"{base}/chat/completions", content=chunks(), headers={"Authorization": f"Bearer {SOLO}"}, timeout=30)
    assert refused.status_code == 413 and refused.json()["error"]["code"] == "request_too_large"
    fits = {"model": "smart", "messages": [{"role": "user", "content": "x " * 20_000}], "max_tokens": 5}
    reply = post(base, "/chat/completions", fits)
    assert reply.status_code == 200, reply.text
    assert fake.requests() == 1


# -- 5. answers a client reads right -------------------------------------------------------

def test_each_refusal_has_the_status_an_sdk_acts_on(fake: FakeProvider, hostile: tuple[str, list[str]]) -> None:
    """An unknown model is OpenAI's 404 `model_not_found`; a request no route could ever
    serve is the caller's 400; unknown paths and methods answer OpenAI's JSON error."""
    base, _ = hostile
    sdk = client(base, SOLO)
    with pytest.raises(openai.NotFoundError) as unknown:
        sdk.chat.completions.create(model="nope", messages=MESSAGES)  # type: ignore[arg-type]
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as never:
        sdk.embeddings.create(model="smart", input="hello")
    assert "cannot do embedding" in never.value.message
    lost = httpx.post(f"{base}/nope", json={}, headers={"Authorization": f"Bearer {SOLO}"}, timeout=10)
    assert lost.status_code == 404 and lost.json()["error"]["type"] == "invalid_request_error"
    wrong = httpx.get(f"{base}/chat/completions", headers={"Authorization": f"Bearer {SOLO}"}, timeout=10)
    assert wrong.status_code == 405 and "error" in wrong.json()
    assert fake.requests() == 0


def test_a_budget_held_only_by_calls_in_flight_invites_a_retry(fake: FakeProvider, hostile: tuple[str, list[str]]) -> None:
    """A refusal only because another call's reservation holds the budget is a 429 with
    Retry-After (a retry may fit once it settles), not `insufficient_quota`."""
    import threading

    base, _ = hostile
    fake.script("cloud", Hang(1.5))
    slow = threading.Thread(target=lambda: client(base, TIGHT).chat.completions.create(model="smart", messages=MESSAGES, max_tokens=5))  # type: ignore[arg-type]
    slow.start()
    for _ in range(100):
        if spend(base, TIGHT)["in_flight"] == 1:
            break
        time.sleep(0.05)
    reply = post(base, "/chat/completions", {"model": "smart", "messages": MESSAGES, "max_tokens": 5}, key=TIGHT)
    slow.join()
    assert reply.status_code == 429, reply.text
    assert reply.json()["error"]["code"] == "budget_in_flight"
    assert "retry-after" in reply.headers and "x-should-retry" not in reply.headers
    assert fake.requests() == 1


def test_a_budgeted_key_with_its_store_down_gets_503_store_unavailable(fake: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store, not the budget, is why: 503 `store_unavailable`, which the SDK may retry,
    and nothing sent. (In this process: the app `serve` runs, the SDK on its test client.)"""
    from starlette.testclient import TestClient

    from policy_router.server import create_app

    for name, value in (("PROVIDER_KEY", f"{KEY_PREFIX}provider"), ("TEAM_KEY", TEAM), ("LOCAL_KEY", LOCAL_ONLY)):
        monkeypatch.setenv(name, value)
    data = policy(fake, breaker=False, store={"redis": f"redis://127.0.0.1:{_free_port()}", "timeout": 0.2})
    with TestClient(create_app(data)) as http:
        # SOLO spends from the file's budget and has no rate window: the budget is asked.
        sdk = openai.OpenAI(base_url="http://testserver/v1", api_key=SOLO, http_client=http, max_retries=0)
        with pytest.raises(openai.InternalServerError) as down:
            sdk.chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
        assert down.value.status_code == 503 and down.value.code == "store_unavailable"
    assert fake.requests() == 0


# -- 6. the SDK's retries do not multiply the router's decision --------------------------

def test_the_sdks_default_retries_send_one_round_not_three(fake: FakeProvider, hostile: tuple[str, list[str]]) -> None:
    """With the SDK's default `max_retries=2`: every route failing (502) and the deadline
    passing (504) each send each route the request once."""
    base, _ = hostile
    sdk = openai.OpenAI(base_url=base, api_key=SOLO)  # the SDK's own retries, as users have them
    fake.script("cloud", Fail(503), Fail(503), Fail(503))
    fake.script("local", Fail(503), Fail(503), Fail(503))
    with pytest.raises(openai.APIStatusError) as failed:
        sdk.chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
    assert failed.value.status_code == 502
    assert fake.requests("cloud") == 1 and fake.requests("local") == 1
    fake.reset()
    fake.script("cloud", Hang(1.5), Hang(1.5), Hang(1.5))
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as late:
        sdk.chat.completions.create(model="smart", messages=MESSAGES, extra_headers={"x-policy-router-deadline": "0.5"})  # type: ignore[arg-type]
    assert late.value.status_code == 504 and fake.requests() == 1
    time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))  # the hang's late bill lands now


# -- 7. a client that leaves ---------------------------------------------------------------

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_client_that_leaves_has_its_call_cancelled_and_settled(
    fake: FakeProvider, hostile: tuple[str, list[str]], stream: bool
) -> None:
    """A client that gives up before a slow whole answer, or before a stream's first
    chunk: within a second nothing is in flight, its reservation charged (the request had
    left), and the provider's connection closed rather than waited on."""
    base, _ = hostile
    fake.script("cloud", Hang(6))
    body = {"model": "smart", "messages": MESSAGES, "max_tokens": 20, "stream": stream}
    before = spend(base)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{base}/chat/completions", json=body, headers={"Authorization": f"Bearer {SOLO}"}, timeout=1.0)
    left = time.monotonic()
    while spend(base)["in_flight"] and time.monotonic() - left < 1.0:
        time.sleep(0.05)
    after = spend(base)
    assert after["in_flight"] == 0 and after["reserved"] == "0.000000"
    assert Decimal(after["spent"]) > Decimal(before["spent"])  # charged what it may have billed
    assert fake.requests() == 1


# -- 8. start and stop ---------------------------------------------------------------------

def _serve(args: list[str], path: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "policy_router", "serve", str(path), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TEAM_KEY": TEAM, "LOCAL_KEY": LOCAL_ONLY, "EMB_KEY": EMB_ONLY, "TIGHT_KEY": TIGHT,
             "PROVIDER_KEY": f"{KEY_PREFIX}provider", "PYTHONPATH": str(ROOT)},
    )


def test_a_bad_port_a_port_in_use_or_a_bad_file_exit_2_before_serving(
    fake: FakeProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each is refused with exit code 2 and a line saying why, and "serving" is never
    printed (the command, run in this process: a regression would serve, and hang)."""
    import threading

    from policy_router.cli import main

    for name, value in (("PROVIDER_KEY", f"{KEY_PREFIX}provider"), ("TEAM_KEY", TEAM), ("LOCAL_KEY", LOCAL_ONLY), ("EMB_KEY", EMB_ONLY), ("TIGHT_KEY", TIGHT)):
        monkeypatch.setenv(name, value)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(hostile_policy(fake)))
    broken = tmp_path / "broken.yaml"
    broken.write_text("groups: {}\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        runs = [(["--port", "99999"], path, "65535"), (["--port", str(busy)], path, "cannot listen"), ([], broken, "groups")]
        for args, where, said in runs:
            code: list[int] = []
            run = threading.Thread(target=lambda a=args, w=where, c=code: c.append(main(["serve", str(w), *a])), daemon=True)
            run.start()
            run.join(timeout=60)
            out = capsys.readouterr()
            assert code == [2], (args, out)
            assert said in out.err and "serving" not in out.err + out.out


def test_sigterm_gives_requests_their_grace_then_cancels_and_settles_them(fake: FakeProvider, tmp_path: Path) -> None:
    """With a hung provider, SIGTERM ends the process after its grace (1 s here), not after
    the provider: the request is cancelled, its client told the connection is gone."""
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(hostile_policy(fake)))
    port = _free_port()
    proc = _serve(["--port", str(port)], path)
    try:
        assert proc.stdout is not None
        assert "serving" in proc.stdout.readline()
        base = f"http://127.0.0.1:{port}/v1"
        fake.script("cloud", Hang(20))
        import threading

        outcome: list[BaseException | None] = []

        def ask() -> None:
            try:
                client(base, SOLO).chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
                outcome.append(None)
            except BaseException as error:  # the connection closes under it
                outcome.append(error)

        asking = threading.Thread(target=ask)
        asking.start()
        while fake.requests() == 0:
            time.sleep(0.05)
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert time.monotonic() - stopped < 10  # the grace, not the provider's 20 s
        asking.join(timeout=15)
        assert outcome and outcome[0] is not None
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()


def test_a_route_named_beyond_latin1_is_answered_with_its_name_encoded(fake: FakeProvider, hostile: tuple[str, list[str]]) -> None:
    base, _ = hostile
    raw = client(base, SOLO).chat.completions.with_raw_response.create(model="fancy", messages=MESSAGES)  # type: ignore[arg-type]
    assert unquote(raw.headers["x-policy-router-route"]) == "cloud — primary"
    assert raw.parse().choices[0].message.content


# -- 10. per-key access --------------------------------------------------------------------

def test_a_key_limited_to_some_groups_sees_and_calls_only_those(fake: FakeProvider, hostile: tuple[str, list[str]]) -> None:
    base, _ = hostile
    limited = client(base, EMB_ONLY)
    assert [m.id for m in limited.models.list()] == ["emb"]
    with pytest.raises(openai.NotFoundError) as refused:
        limited.chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
    assert refused.value.code == "model_not_found"
    assert limited.embeddings.create(model="emb", input="hello").data
    assert {m.id for m in client(base, SOLO).models.list()} == {"smart", "emb", "fancy"}
    assert fake.requests() == 1
