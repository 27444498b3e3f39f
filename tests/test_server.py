"""`policy-router serve`: a real server process on loopback, the official openai SDK as its
client, FakeProvider as the providers. What a client of the server sees: OpenAI's shapes,
the journey in the headers and body, keys as tenants, errors with the status it acts on,
and the router's promises held behind it (nothing sent that was refused, spent <= cap
across two servers on one Redis)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from policy_router.config.keys import digest
from policy_router.testing import Cut, Fail, FakeProvider, Hang, Reply

from ._redis import RedisServer
from .conftest import KEY_PREFIX

ROOT = Path(__file__).resolve().parent.parent
TEAM, SOLO, LOCAL_ONLY = "sk-team-key-1", "sk-solo-key-2", "sk-local-key-3"
MESSAGES = [{"role": "user", "content": "Say hello."}]
CAPS = {"tools": True, "streaming": True}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def policy(fake: FakeProvider, **extra: Any) -> dict[str, Any]:
    """Two groups on FakeProvider: `smart` (a vendor route, then one on this machine) and
    `emb`; three keys: one with its own small budget and rpm, one spending from the file's
    budget, one held on the device."""
    def route(model: str, **kw: Any) -> dict[str, Any]:
        return {"model": f"openai/{model}", "api_base": fake.base_url, "api_key": "os.environ/PROVIDER_KEY",
                "prices": "mine", **kw}

    return {
        "name": "served",
        "groups": {
            "smart": {"routes": [route("cloud", reach="vendor", capabilities=CAPS),
                                 route("local", reach="on_device", capabilities=CAPS)]},
            "emb": {"routes": [route("embedder", capabilities={"embedding": True})]},
        },
        "price_tables": {"mine": {"currency": "USD", "as_of": "2026-11-01", "source": "test", "models": {
            f"openai/{m}": {"input": "1000", "output": "1000"} for m in ("cloud", "local", "embedder")}}},
        "budget": {"cap": "100.00"},
        "server": {"keys": {
            "team": {"key": "os.environ/TEAM_KEY", "budget": {"cap": "0.20"}, "rpm": 1000},
            "solo": {"key_sha256": digest(SOLO)},
            "local-app": {"key": "os.environ/LOCAL_KEY", "on_device": True},
        }},
        **extra,
    }


@contextlib.contextmanager
def served(tmp_path: Path, data: dict[str, Any], name: str = "policy.yaml") -> Iterator[tuple[str, list[str]]]:
    """`policy-router serve` on a free loopback port, until the block ends; yields its base
    URL and, once it has stopped, what it wrote to stdout and stderr (in the list)."""
    with served_all(tmp_path, data, [name]) as (one,):
        yield one


@contextlib.contextmanager
def served_all(tmp_path: Path, data: dict[str, Any], names: list[str]) -> Iterator[list[tuple[str, list[str]]]]:
    """A server per name in `names`, all started at once (each imports LiteLLM first:
    seconds), then each waited for; as `served` yields one."""
    env = {**os.environ, "TEAM_KEY": TEAM, "LOCAL_KEY": LOCAL_ONLY,
           "PROVIDER_KEY": f"{KEY_PREFIX}provider", "PYTHONPATH": str(ROOT)}
    started: list[tuple[subprocess.Popen[bytes], str, Path, list[str]]] = []
    try:
        for name in names:
            path = tmp_path / name
            path.write_text(yaml.safe_dump(data))
            port = _free_port()
            out = tmp_path / f"{name}.out"
            with out.open("w") as sink:
                proc = subprocess.Popen(
                    # One worker even where the file names a store (the default would be one
                    # per core): two servers on one store are what those tests are about.
                    [sys.executable, "-m", "policy_router", "serve", str(path), "--port", str(port), "--workers", "1"],
                    stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
                )
            started.append((proc, f"http://127.0.0.1:{port}", out, []))
        for proc, base, out, _ in started:
            wait_healthy(proc, base, out)
        yield [(f"{base}/v1", written) for _, base, _, written in started]
    finally:
        for proc, _, _, _ in started:
            proc.terminate()
        for proc, _, out, written in started:
            proc.wait(timeout=30)
            written.append(out.read_text())


def wait_healthy(proc: subprocess.Popen[Any], base: str, out: Path, tries: int = 600) -> None:
    """Until the server at `base` answers /health (it imports LiteLLM first: seconds on a
    busy machine, a tenth of a second a try); what it wrote, when it exits before."""
    for _ in range(tries):
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {out.read_text()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        time.sleep(0.1)


def client(base: str, key: str = TEAM) -> openai.OpenAI:
    # No retries of the SDK's own: each test counts what reached the providers.
    return openai.OpenAI(base_url=base, api_key=key, max_retries=0)


@pytest.fixture(scope="module")
def server(_fake_server: FakeProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[str]]]:
    # No breaker: the tests that share this server fail routes on purpose, and each one's
    # failures must not rest a route for the next (the breaker is tested in-process).
    with served(tmp_path_factory.mktemp("server"), policy(_fake_server, breaker=False)) as running:
        yield running


def test_the_openai_sdk_works_unchanged_against_it(fake: FakeProvider, server: tuple[str, list[str]]) -> None:
    """Chat (whole and streamed), embeddings, Responses and the model list, through the
    official SDK; the route that answered and the cost in headers and body."""
    base, _ = server
    sdk = client(base)
    raw = sdk.chat.completions.with_raw_response.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
    answer = raw.parse()
    assert answer.choices[0].message.content == "Hello from FakeProvider."
    assert raw.headers["x-policy-router-route"] == "openai/cloud"
    assert raw.headers["x-policy-router-attempts"] == "1"
    amount, currency = raw.headers["x-policy-router-cost"].split()
    assert currency == "USD" and Decimal(amount) > 0
    extra = answer.model_extra or {}
    assert extra["policy_router"]["route"] == "openai/cloud"
    assert Decimal(extra["policy_router"]["cost"]) == Decimal(amount)

    stream = sdk.chat.completions.create(model="smart", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello from FakeProvider."

    embedded = sdk.embeddings.create(model="emb", input="hello")
    assert len(embedded.data[0].embedding) > 0
    assert sdk.responses.create(model="smart", input="Say hello.").output_text == "Hello from FakeProvider."
    models = {m.id: m for m in sdk.models.list()}
    assert set(models) == {"smart", "emb"}
    assert "tools" in (models["smart"].model_extra or {})["capabilities"]
    events = [e.type for e in sdk.responses.create(model="smart", input="Say hello.", stream=True)]
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert "response.output_text.delta" in events
    assert fake.requests("cloud") == 4 and fake.requests("embedder") == 1


def test_a_stream_cut_after_its_first_chunk_ends_in_an_error_the_sdk_raises(
    fake: FakeProvider, server: tuple[str, list[str]]
) -> None:
    """The text already sent stays sent; the failure then arrives as an error event, which
    the SDK raises, with the router's words for it."""
    base, _ = server
    fake.script("cloud", Cut(after=2, reply=Reply("one two three four five six")))
    stream = client(base, SOLO).chat.completions.create(model="smart", messages=MESSAGES, stream=True)  # type: ignore[arg-type]
    seen: list[str] = []
    with pytest.raises(openai.APIError) as cut:
        for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert "".join(seen).startswith("one")
    said = cut.value.body  # the error object: the journey in the router's words
    assert isinstance(said, dict) and said["status"] == 502
    assert "tried openai/cloud" in said["policy_router"]["journey"]
    assert "raised in the stream" in said["policy_router"]["journey"]
    assert fake.requests() == 1


def test_the_compatibility_script_passes_with_this_projects_sdk(
    fake: FakeProvider, server: tuple[str, list[str]]
) -> None:
    """`tests/compat/openai_client.py`, the script run by hand with the 3.x SDK (which the
    pinned frameworks cannot install here), passes every check with this project's SDK."""
    from .compat.openai_client import check

    base, _ = server
    done = check(base, SOLO)
    assert done[0] == f"openai {openai.__version__}" and len(done) == 7
    assert fake.requests("embedder") == 1


def test_curl_shaped_requests_and_the_journey_on_failure(fake: FakeProvider, server: tuple[str, list[str]]) -> None:
    """A plain HTTP client (what curl sends) gets the same; when the vendor fails, the
    request fails over and the headers and body say so."""
    base, _ = server
    fake.script("cloud", Fail(503))
    reply = httpx.post(f"{base}/chat/completions", json={"model": "smart", "messages": MESSAGES},
                       headers={"Authorization": f"Bearer {SOLO}"}, timeout=30)
    assert reply.status_code == 200
    assert reply.headers["x-policy-router-route"] == "openai/local"
    assert reply.headers["x-policy-router-attempts"] == "2"
    assert "openai/cloud" in reply.json()["policy_router"]["journey"]
    assert fake.requests("cloud") == 1 and fake.requests("local") == 1


def test_an_unknown_key_is_refused_and_no_key_is_ever_printed(fake: FakeProvider, server: tuple[str, list[str]]) -> None:
    base, written = server
    with pytest.raises(openai.AuthenticationError) as refused:
        client(base, "sk-not-a-key").chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
    assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"
    assert httpx.get(f"{base[:-3]}/health", timeout=10).json() == {"status": "ok"}
    mine = httpx.get(f"{base[:-3]}/health", headers={"Authorization": f"Bearer {TEAM}"}, timeout=10).json()
    assert mine["key"]["name"] == "team" and mine["key"]["budget"] == "key:team"
    assert fake.requests() == 0
    shown = str(mine) + "".join(written)
    assert TEAM not in shown and SOLO not in shown and KEY_PREFIX not in shown


def test_a_request_cannot_weaken_its_key_or_move_its_route(fake: FakeProvider, server: tuple[str, list[str]]) -> None:
    """The on-device key's request that asks for on_device false still never reaches the
    vendor; any key's request that names an `api_base` (or any argument OpenAI does not
    define) is refused with a 400 naming it, and nothing is sent."""
    base, _ = server
    local = client(base, LOCAL_ONLY)
    raw = local.chat.completions.with_raw_response.create(
        model="smart", messages=MESSAGES, extra_body={"policy_router": {"on_device": False}},  # type: ignore[arg-type]
    )
    assert raw.headers["x-policy-router-route"] == "openai/local"
    asked = client(base, SOLO).chat.completions.with_raw_response.create(
        model="smart", messages=MESSAGES, extra_headers={"x-policy-router-on-device": "true"},  # type: ignore[arg-type]
    )
    assert asked.headers["x-policy-router-route"] == "openai/local"
    assert fake.requests("cloud") == 0
    for moved in ({"api_base": "http://198.51.100.7/v1"}, {"api_key": "sk-mine"}, {"mock_response": "hi"}):
        with pytest.raises(openai.BadRequestError) as refused:
            client(base).chat.completions.create(model="smart", messages=MESSAGES, extra_body=moved)  # type: ignore[arg-type]
        assert repr(next(iter(moved))) in refused.value.message
    assert fake.requests() == 2


def test_errors_carry_the_status_a_client_acts_on(fake: FakeProvider, server: tuple[str, list[str]]) -> None:
    """Past the deadline 504; the provider refusing the request 400; every route failing
    502; over the key's budget 429 `insufficient_quota` (with no retry invited), nothing
    sent for it."""
    base, _ = server
    sdk = client(base, SOLO)
    fake.script("cloud", Hang(4))
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as late:
        sdk.chat.completions.create(model="smart", messages=MESSAGES, extra_headers={"x-policy-router-deadline": "1"})  # type: ignore[arg-type]
    assert late.value.status_code == 504 and late.value.code == "deadline_exceeded"
    assert fake.requests("local") == 0
    # The hanging provider answers after 4 s: waited out, so no bill of it lands later.
    time.sleep(max(0.0, 4.5 - (time.monotonic() - started)))
    fake.reset()
    fake.script("cloud", Fail(400, "bad request: messages"))
    with pytest.raises(openai.BadRequestError) as bad:
        sdk.chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
    assert bad.value.code == "provider_rejected_request" and fake.requests("local") == 0
    fake.script("cloud", Fail(503))
    fake.script("local", Fail(503))
    with pytest.raises(openai.APIStatusError) as down:
        sdk.chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
    assert down.value.status_code == 502
    assert "openai/cloud" in down.value.body["policy_router"]["journey"]  # type: ignore[index]


def test_a_key_over_its_budget_gets_429_and_nothing_is_sent(fake: FakeProvider, tmp_path: Path) -> None:
    data = policy(fake)
    data["server"]["keys"]["team"]["budget"] = {"cap": "0.05"}
    with served(tmp_path, data) as (base, _):
        sdk = client(base)
        answered = 0
        with pytest.raises(openai.RateLimitError) as refused:
            for _ in range(20):
                sdk.chat.completions.create(model="smart", messages=MESSAGES, max_tokens=5)  # type: ignore[arg-type]
                answered += 1
        assert refused.value.code == "insufficient_quota"
        assert refused.value.response.headers["x-should-retry"] == "false"
        assert fake.requests() == answered
        mine = httpx.get(f"{base[:-3]}/health", headers={"Authorization": f"Bearer {TEAM}"}, timeout=10).json()
        assert answered >= 1 and Decimal(mine["key"]["spent"]) <= Decimal("0.05")
        # Another key spends from the file's budget: the team's cap is the team's.
        assert client(base, SOLO).chat.completions.create(model="smart", messages=MESSAGES).choices  # type: ignore[arg-type]


def test_two_servers_on_one_redis_hold_a_keys_budget_and_rate(
    fake: FakeProvider, tmp_path: Path, redis_server: RedisServer
) -> None:
    """Two server processes on one Redis: the key's budget is one budget (spent <= cap,
    across both, under concurrent requests) and its rpm one window."""
    data = policy(fake, store={"redis": redis_server.url, "namespace": f"served-{time.monotonic_ns()}"})
    data["server"]["keys"]["team"]["budget"] = {"cap": "0.05"}
    data["server"]["keys"]["solo"]["rpm"] = 4
    with served_all(tmp_path, data, ["one.yaml", "two.yaml"]) as ((first, _), (second, _)):
        def ask(base: str) -> str:
            try:
                client(base).chat.completions.create(model="smart", messages=MESSAGES, max_tokens=5)  # type: ignore[arg-type]
                return "answered"
            except openai.RateLimitError as error:
                return str(error.code)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(ask, [first, second] * 20))
        # The burst may end while its calls are still in flight (each refusal then says
        # budget_in_flight); once they have settled, each server refuses for the budget.
        outcomes += [ask(first), ask(second)]
        assert "insufficient_quota" in outcomes
        assert fake.requests() == outcomes.count("answered")
        for base in (first, second):
            seen = httpx.get(f"{base[:-3]}/health", headers={"Authorization": f"Bearer {TEAM}"}, timeout=10).json()
            assert Decimal(seen["key"]["spent"]) <= Decimal("0.05")
        billed = sum(fake.bills())
        assert Decimal(billed) * Decimal("1000") / Decimal(1_000_000) <= Decimal("0.05")

        fake.reset()
        solo = [client(base, SOLO) for base in (first, second)]
        codes = []
        for i in range(6):
            try:
                solo[i % 2].chat.completions.create(model="smart", messages=MESSAGES)  # type: ignore[arg-type]
                codes.append(200)
            except openai.RateLimitError as error:
                codes.append(error.status_code)
                assert int(error.response.headers["retry-after"]) >= 1
        assert codes == [200] * 4 + [429] * 2 and fake.requests() == 4
