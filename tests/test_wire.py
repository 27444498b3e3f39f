"""Every promise judged at the wire (issue 35): the floor by where the bytes really go, the
bound by the body LiteLLM really builds, charges by evidence of billing, every secret of
the call and of the environment scrubbed.

A "vendor" FakeProvider and a recording HTTP proxy listen on an address of this machine
off loopback; an audit hook records every `socket.connect` the router's own guard lets
through. The generated test at the end draws environments (proxy variables, `NO_PROXY`,
LiteLLM's global `api_base`), route tables, bodies (both reply caps, `extra_body`, tools in
several spellings, secret headers), replies with and without usage, and faults after the
write; each class of break found is an example below.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import ipaddress
import os
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from loguru import logger
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from policy_router import (
    AttemptLog,
    Budget,
    ConfigError,
    Money,
    NoRouteError,
    OverBudgetError,
    PriceTable,
    Reach,
    Route,
    Router,
)
from policy_router.drive.seam import guard
from policy_router.drive.seam.unlogged import UNLOGGED
from policy_router.integrations.otel import OTelObserver
from policy_router.testing import Cut, Drop, Fail, FakeProvider, Hang, Reply

from ._hosts import RecordingProxy, outside_address
from .test_bounds import Books

OUTSIDE = outside_address()
CAPS = {"chat": True, "tools": True, "streaming": True, "embedding": True}
HI = [{"role": "user", "content": "Say hello to the team."}]
PER_TOKEN = 1000  # micro-dollars: every token costs a tenth of a cent, in and out
PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "as_of": "2026-12-01",
        "source": "test: a tenth of a cent a token",
        "models": {
            m: {"input": "1000", "output": "1000"}
            for m in ("openai/local", "openai/vendor", "ollama_chat/llama3.1", "openai/declared")
        },
    }
)

# The guard's hook first, then the recorder: a connection the guard refuses never happens,
# so what is recorded is every connection the process really made during a floor request.
guard.install()
_RECORDING = threading.Event()
_CONNECTS: list[str] = []


def _record(event: str, args: tuple[Any, ...]) -> None:
    if event == "socket.connect" and _RECORDING.is_set():
        address = args[-1]
        if isinstance(address, tuple) and address:
            _CONNECTS.append(str(address[0]))


sys.addaudithook(_record)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextlib.contextmanager
def on_the_floor() -> Iterator[list[str]]:
    """Record the connections made meanwhile (those the guard let through)."""
    _CONNECTS.clear()
    _RECORDING.set()
    try:
        yield _CONNECTS
    finally:
        _RECORDING.clear()


@contextlib.contextmanager
def environment(values: dict[str, str | None], api_base: str | None = None) -> Iterator[None]:
    """Set (or unset, for None) environment variables and LiteLLM's global `api_base` for
    the block, restoring both after. The HTTP clients LiteLLM made meanwhile (which read
    the proxy variables when they were made) are let go after it too, so no test after it
    inherits a client made under its proxy."""
    before = {k: os.environ.get(k) for k in values}
    old_base = litellm.api_base
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        litellm.api_base = api_base
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        litellm.api_base = old_base
        litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.fixture(scope="module")
def vendor() -> Iterator[FakeProvider]:
    """A FakeProvider off loopback: a vendor on another machine, as the floor sees it."""
    with FakeProvider(host=OUTSIDE) as served:
        yield served


@pytest.fixture(scope="module")
def proxy() -> Iterator[RecordingProxy]:
    """A recording HTTP proxy off loopback, forwarding what it gets."""
    with RecordingProxy(OUTSIDE) as running:
        yield running


def _local(fake: FakeProvider, **kw: Any) -> Route:
    kw.setdefault("api_key", "sk-wire-local-key-0001")
    return Route("openai/local", group="g", api_base=fake.base_url, capabilities=CAPS,
                 prices=PRICES, **kw)


def _settled(router: Router, patience: float = 10.0) -> None:
    """Wait until no call holds a reservation (an abandoned sync call settles when it ends)."""
    ends = time.monotonic() + patience
    while router.spending().in_flight and time.monotonic() < ends:
        time.sleep(0.02)


# -- 1. the floor, where the bytes really go -----------------------------------------------------
@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
@pytest.mark.parametrize("mode", ["sync", "stream", "async"])
def test_a_proxy_in_the_environment_never_carries_an_on_device_prompt_off_the_machine(
    fake: FakeProvider, proxy: RecordingProxy, variable: str, mode: str
) -> None:
    """An on-device route on 127.0.0.1 with a proxy variable naming another machine: the
    attempt is stopped before the HTTP client is called, naming the variable and the fix;
    the proxy gets no connection, nothing is received, nothing rests."""
    proxy.reset()
    router = Router([_local(fake)])
    unset = {"NO_PROXY": None, "no_proxy": None}
    with environment({variable: proxy.url, **unset}), on_the_floor() as connects, pytest.raises(
        NoRouteError
    ) as refused:
        if mode == "async":
            asyncio.run(router.acompletion(model="g", messages=HI, on_device=True))
        elif mode == "stream":
            list(router.completion(model="g", messages=HI, on_device=True, stream=True))
        else:
            router.completion(model="g", messages=HI, on_device=True)
    assert f"{variable}=" in str(refused.value) and "NO_PROXY" in str(refused.value)
    assert all(_loopback(h) for h in connects)
    assert proxy.connections == 0 and fake.requests() == 0
    assert refused.value.journey.attempts == () and router.resting() == {}


def test_no_proxy_naming_the_host_lets_the_on_device_request_go_direct(
    fake: FakeProvider, proxy: RecordingProxy
) -> None:
    """With NO_PROXY naming the loopback host, the on-device call goes straight there."""
    proxy.reset()
    router = Router([_local(fake, api_key="sk-wire-no-proxy-client")])
    with environment({"HTTP_PROXY": proxy.url, "NO_PROXY": "localhost,127.0.0.1"}):
        # LiteLLM builds (and keeps) its client now, with NO_PROXY read.
        answer = router.completion(model="g", messages=HI, on_device=True)
    assert answer.choices[0].message.content and proxy.connections == 0
    assert fake.requests() == 1


def test_a_client_made_while_a_proxy_was_set_is_stopped_by_the_guard(
    fake: FakeProvider, proxy: RecordingProxy
) -> None:
    """LiteLLM keeps the HTTP clients it makes; httpx reads the proxy variables when one
    is made. After the variable is gone, the kept client still proxies, over a connection
    it keeps open to the proxy (no new connect for the guard to see): the clients LiteLLM
    keeps are asked which transport they would use, and the attempt is stopped."""
    proxy.reset()
    router = Router([_local(fake, api_key="sk-wire-stale-client-1", timeout=7.0)])
    with environment({"HTTP_PROXY": None, "NO_PROXY": None, "no_proxy": None}):
        os.environ["HTTP_PROXY"] = proxy.url
        with contextlib.suppress(Exception):  # no floor: it goes through the proxy
            router.completion(model="g", messages=HI)
        del os.environ["HTTP_PROXY"]  # the client LiteLLM made keeps it
        seen, received = proxy.connections, fake.requests()
        with on_the_floor() as connects, pytest.raises(NoRouteError, match="keeps would carry"):
            router.completion(model="g", messages=HI, on_device=True)
    assert seen >= 1 and all(_loopback(h) for h in connects)
    assert proxy.connections == seen and fake.requests() == received


@pytest.fixture
def redirector(vendor: FakeProvider) -> Iterator[str]:
    """A server on loopback that answers every request with a 307 to the vendor off the
    machine, keeping its connections open: an `api_base` that looks on-device."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(307)
            self.send_header("Location", vendor.base_url + self.path.removeprefix("/v1"))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("mode", ["sync", "stream", "async", "astream"])
def test_a_redirect_never_carries_an_on_device_prompt_off_the_machine(
    vendor: FakeProvider, redirector: str, mode: str
) -> None:
    """A loopback server answers 307 to a host elsewhere. An ordinary call follows it (the
    HTTP client LiteLLM keeps then holds a connection there); an `on_device=True` call
    after it, and a first one, are refused before the redirect is sent, on the kept
    connection or a new one: the vendor receives only the ordinary call."""
    vendor.reset()
    key = f"sk-wire-redirect-{mode}-{time.monotonic_ns()}"
    router = Router([Route("openai/local", group="g", api_base=redirector, api_key=key,
                           capabilities=CAPS)])
    first = Router([Route("openai/local", group="g", api_base=redirector, api_key=key + "-new",
                          capabilities=CAPS)])
    secret = [{"role": "user", "content": "the on-device secret"}]
    streamed = mode in ("stream", "astream")

    def call(on: Router, **kw: Any) -> Any:
        if streamed:
            return list(on.completion(model="g", messages=secret, stream=True, **kw))
        return on.completion(model="g", messages=secret, **kw)

    async def acall(on: Router, **kw: Any) -> Any:
        if streamed:
            stream = await on.acompletion(model="g", messages=secret, stream=True, **kw)
            return [chunk async for chunk in stream]
        return await on.acompletion(model="g", messages=secret, **kw)

    async def both() -> list[BaseException | None]:
        await acall(router)  # one loop: the kept client and its connections are reused
        found: list[BaseException | None] = []
        for on in (router, first):
            try:
                await acall(on, on_device=True)
                found.append(None)
            except NoRouteError as refused:
                found.append(refused)
        return found

    if mode in ("async", "astream"):
        refusals = asyncio.run(both())
    else:
        call(router)
        refusals = []
        for on in (router, first):
            try:
                call(on, on_device=True)
                refusals.append(None)
            except NoRouteError as refused:
                refusals.append(refused)
    assert vendor.requests() == 1  # the ordinary call alone
    assert all(r is not None and "leave this machine" in str(r) for r in refusals), refusals


def _client_kinds() -> dict[str, Callable[[], Any]]:
    """The HTTP clients LiteLLM and the OpenAI SDK really keep, by kind: httpx's, the OpenAI
    SDK's (httpx inside), LiteLLM's aiohttp transport under httpx, and httpx2's."""
    import aiohttp
    import httpx
    import httpx2
    import openai
    from litellm.llms.custom_httpx.aiohttp_transport import LiteLLMAiohttpTransport

    return {
        "httpx": httpx.Client,
        "httpx-async": httpx.AsyncClient,
        "openai": lambda: openai.OpenAI(api_key="sk-wire-kinds", base_url="http://127.0.0.1:9/v1"),
        "openai-async": lambda: openai.AsyncOpenAI(api_key="sk-wire-kinds", base_url="http://127.0.0.1:9/v1"),
        "aiohttp": lambda: httpx.AsyncClient(
            transport=LiteLLMAiohttpTransport(client=lambda: aiohttp.ClientSession())
        ),
        "httpx2": httpx2.Client,
        "httpx2-async": httpx2.AsyncClient,
    }


@pytest.mark.parametrize("kind", sorted(_client_kinds()))
def test_the_guard_holds_every_kind_of_kept_client_on_a_kept_connection(
    vendor: FakeProvider, redirector: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever HTTP library a kept client is of (httpx, aiohttp under LiteLLM's transport,
    httpx2): after it followed a redirect off the machine once (it then holds a connection
    there), the same redirect during an on-device attempt is refused before it is sent."""
    from policy_router.drive.seam import guard
    from policy_router.ground.outcome import OffDeviceConnection

    made = _client_kinds()[kind]()
    http = getattr(made, "_client", made)  # an SDK client's HTTP client
    monkeypatch.setattr(litellm.in_memory_llm_clients_cache, "cache_dict", {"kinds": made})
    url = f"{redirector}/chat/completions"
    body = {"model": "local", "messages": [{"role": "user", "content": "secret"}]}

    async def apost(on_device: bool) -> Any:
        if on_device:
            with guard.on_device(frozenset()):
                return await http.post(url, json=body, follow_redirects=True)
        return await http.post(url, json=body, follow_redirects=True)

    def post(on_device: bool) -> Any:
        if inspect.iscoroutinefunction(http.post):
            return asyncio.run(apost(on_device))
        if on_device:
            with guard.on_device(frozenset()):
                return http.post(url, json=body, follow_redirects=True)
        return http.post(url, json=body, follow_redirects=True)

    async def both() -> None:  # one loop, so the async client keeps its connection
        await apost(False)
        guard.watch_kept()
        with pytest.raises(OffDeviceConnection):
            await apost(True)

    vendor.reset()
    if inspect.iscoroutinefunction(http.post):
        asyncio.run(both())
    else:
        post(False)
        guard.watch_kept()
        with pytest.raises(OffDeviceConnection):
            post(True)
    assert vendor.requests() == 1  # the ordinary request alone reached the vendor
    guard.watch_kept()  # a second look adds no second hook
    assert len(http.event_hooks["request"]) == 1


@pytest.mark.parametrize("library", ["httpx", "httpx2"])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_kept_client_of_either_library_made_with_a_proxy_is_named(
    library: str, asynchronous: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy check reads a kept client's own choice of transport, made in its own URL
    type: httpx's and httpx2's clients made with a proxy off this machine are both named;
    one whose proxy is on loopback is not."""
    import importlib

    from policy_router.drive.seam import guard

    module = importlib.import_module(library)
    kind = module.AsyncClient if asynchronous else module.Client
    far, near = kind(proxy=f"http://{OUTSIDE}:3128"), kind(proxy="http://127.0.0.1:3128")
    monkeypatch.setattr(litellm.in_memory_llm_clients_cache, "cache_dict", {"far": far})
    assert guard.kept_proxy(["http://127.0.0.1:9/v1"]) == f"{OUTSIDE}:3128"
    monkeypatch.setattr(litellm.in_memory_llm_clients_cache, "cache_dict", {"near": near})
    assert guard.kept_proxy(["http://127.0.0.1:9/v1"]) is None


@pytest.mark.parametrize(
    ("model", "variable"),
    [("ollama/llama3.1", "OLLAMA_API_BASE"), ("ollama_chat/llama3.1", "OLLAMA_API_BASE"),
     ("llamafile/local-model", "LLAMAFILE_API_BASE")],
)
def test_a_provider_base_variable_off_the_machine_makes_the_route_a_vendor(
    vendor: FakeProvider, model: str, variable: str
) -> None:
    """A local-serving provider without an api_base connects where its environment
    variable says: inferred vendor when that is another machine, and if the variable is
    set only after the router was built, the checkpoint stops the attempt at the URL
    LiteLLM really uses."""
    with environment({variable: vendor.base_url.removesuffix("/v1")}):
        assert Route(model, capabilities=CAPS).reach is Reach.VENDOR
    router = Router([Route(model, group="g", capabilities=CAPS)])
    assert router.routes[0].reach is Reach.ON_DEVICE  # built before the variable is set
    vendor.reset()
    moved = environment({variable: vendor.base_url.removesuffix("/v1")})
    with moved, on_the_floor() as connects, pytest.raises(NoRouteError, match="not this machine"):
        router.completion(model="g", messages=HI, on_device=True)
    assert all(_loopback(h) for h in connects) and vendor.requests() == 0


def test_litellms_global_api_base_is_where_the_ollama_path_sends(
    fake: FakeProvider, vendor: FakeProvider
) -> None:
    """LiteLLM's ollama path prefers `litellm.api_base` to the route's own: the floor
    checks the URL it really uses, and stops the attempt."""
    vendor.reset()
    route = Route("ollama_chat/llama3.1", group="g", api_base=fake.base_url.removesuffix("/v1"),
                  capabilities=CAPS)
    router = Router([route])
    moved = environment({}, api_base=vendor.base_url.removesuffix("/v1"))
    where = rf"sends this request to http://{OUTSIDE}"
    with moved, on_the_floor() as connects, pytest.raises(NoRouteError, match=where):
        router.completion(model="g", messages=HI, on_device=True)
    assert all(_loopback(h) for h in connects) and vendor.requests() == 0


def test_an_embedding_under_the_floor_is_checked_before_litellm_is_called(
    fake: FakeProvider, proxy: RecordingProxy
) -> None:
    """LiteLLM's embedding path logs nothing a checkpoint can read: it is checked before
    the call, on every base URL LiteLLM may use, and the proxy variable stops it too."""
    assert {"embedding", "aembedding", "responses", "aresponses"} <= UNLOGGED
    proxy.reset()
    router = Router([_local(fake)])
    with environment({"HTTP_PROXY": proxy.url, "NO_PROXY": None, "no_proxy": None}), on_the_floor():
        with pytest.raises(NoRouteError, match="HTTP_PROXY="):
            router.embedding(model="g", input=["private"], on_device=True)
        with pytest.raises(NoRouteError, match="HTTP_PROXY="):
            asyncio.run(router.aembedding(model="g", input=["private"], on_device=True))
    assert proxy.connections == 0 and fake.requests() == 0


def test_litellm_still_does_not_log_embeddings_and_responses() -> None:
    """The measured fact the pre-call check rests on: LiteLLM never calls `logger_fn` for
    an embedding or a Responses call (if a release starts to, the check runs twice)."""
    called: list[str] = []

    def note(details: Any) -> None:
        called.append(str(details.get("log_event_type")))

    with FakeProvider() as served:
        base = {"api_base": served.base_url, "api_key": "k", "logger_fn": note, "max_retries": 0}
        litellm.embedding(model="openai/e", input=["a"], **base)
        litellm.responses(model="openai/r", input="hi", **base)
        assert called == []
        litellm.completion(model="openai/c", messages=HI, **base)
    assert "pre_api_call" in called


# -- 2. charges by evidence ------------------------------------------------------------------
@pytest.mark.parametrize("report", ["missing", "null"])
@pytest.mark.parametrize("mode", ["sync", "async", "stream"])
def test_a_reply_without_usage_is_charged_its_reservation(
    fake: FakeProvider, report: str, mode: str
) -> None:
    """A reply whose usage is missing or null (LiteLLM reads it as 0 and 0) is unmeasured:
    charged its reservation, `is_exact` False, never $0; the bill is covered."""
    fake.script("local", Reply(" ".join(["word"] * 80), report_usage=report))  # type: ignore[arg-type]
    router = Router([_local(fake)], budget=Budget("1.00"))
    kwargs: dict[str, Any] = {"model": "g", "messages": HI, "max_tokens": 100}
    if mode == "async":
        asyncio.run(router.acompletion(**kwargs))
    elif mode == "stream":
        list(router.completion(stream=True, **kwargs))
    else:
        router.completion(**kwargs)
    spent = router.spending()
    assert not spent.is_exact and spent.unmeasured == 1
    assert spent.spent.micros >= PER_TOKEN * sum(fake.bills()) > 0


@pytest.mark.parametrize(
    "fault", ["route timeout", "deadline, sync", "deadline, async", "dropped mid-reply"]
)
def test_an_attempt_abandoned_after_it_was_written_is_charged_its_reservation(
    fake: FakeProvider, fault: str
) -> None:
    """The provider had the request and may bill it: a route timeout, a deadline that cut
    the call (sync and async) and a connection dropped mid-reply are charged the
    reservation, as the README promises; the cap holds the bill."""
    words = Reply(" ".join(["word"] * 50))
    fake.script("local", Cut(reply=words) if "dropped" in fault else Hang(0.8, words))
    route = _local(fake, timeout=0.3) if fault == "route timeout" else _local(fake)
    router = Router([route], budget=Budget("1.00"))
    kwargs: dict[str, Any] = {"model": "g", "messages": HI, "max_tokens": 60}
    if "deadline" in fault:
        kwargs["deadline"] = 0.3
    with pytest.raises(Exception):  # noqa: B017 (the route's own error, or the deadline's)
        if fault.endswith("async"):
            asyncio.run(router.acompletion(**kwargs))
        else:
            router.completion(**kwargs)
    _settled(router)
    time.sleep(0.6)  # the fake writes (and bills) its reply when its hang ends
    spent = router.spending()
    assert spent.calls == 1 and spent.unmeasured == 1 and spent.reserved == Money(0)
    assert spent.spent.micros >= PER_TOKEN * sum(fake.bills())


def test_a_refused_connection_releases_the_reservation(fake: FakeProvider) -> None:
    """Evidence that nothing was written (nobody listens on the port) releases it."""
    dead = Route("openai/local", group="g", api_base="http://127.0.0.1:9/v1", api_key="sk-x",
                 capabilities=CAPS, prices=PRICES)
    router = Router([dead], budget=Budget("1.00"))
    with pytest.raises(litellm.InternalServerError):
        router.completion(model="g", messages=HI, max_tokens=50)
    assert router.spending().spent == Money(0) and router.spending().calls == 0


# -- 3. the bound, from the body LiteLLM builds -------------------------------------------------
@pytest.mark.parametrize(
    "caps",
    [
        {"max_tokens": 1, "max_completion_tokens": 300},
        {"max_completion_tokens": 1, "max_tokens": 300},
        {"max_tokens": 1, "extra_body": {"max_tokens": 300}},
        {"max_tokens": 100, "extra_body": {"n": 3}},
    ],
)
def test_every_cap_and_count_the_body_carries_is_reserved(fake: FakeProvider, caps: dict[str, Any]) -> None:
    """Both caps (the larger is read by some provider), caps and `n` inside `extra_body`
    (merged by the SDK): the reservation holds what the provider may bill, so a cap that
    cannot hold it refuses before sending and one that can is never passed."""
    fake.script("local", Reply(" ".join(["word"] * 400)))
    tight = Router([_local(fake)], budget=Budget("0.25"))
    with pytest.raises(OverBudgetError):
        tight.completion(model="g", messages=HI, **caps)
    assert fake.requests() == 0
    roomy = Router([_local(fake)], budget=Budget("5.00", strict=True), store=Books())
    roomy.completion(model="g", messages=HI, **caps)
    billed = PER_TOKEN * sum(fake.bills())
    store = roomy._life.now.store
    assert isinstance(store, Books) and all(cost <= held for held, cost, _, _ in store.bills)
    assert roomy.spending().spent.micros >= billed


@pytest.mark.parametrize(
    "tool", [{"googleSearch": {}}, {"codeExecution": {}}, {"urlContext": {}},
             {"google_search": {}}, {"type": "web_search_20250305", "name": "web_search"}],
)
def test_server_side_tools_in_any_spelling_are_unbounded(fake: FakeProvider, tool: dict[str, Any]) -> None:
    """A tool the provider runs (Gemini's typeless spellings included) bills what it reads:
    a strict budget refuses it before sending."""
    router = Router([_local(fake)], budget=Budget("100.00", strict=True))
    with pytest.raises(OverBudgetError, match="runs it itself"):
        router.completion(model="g", messages=HI, tools=[tool], max_tokens=10)
    assert fake.requests() == 0


def test_an_imported_row_prices_audio_priority_and_flex() -> None:
    """LiteLLM's audio, priority and flex rates are imported, and the worst case a budget
    reserves covers the costliest of them: an audio reply is no longer priced as text."""
    audio = PriceTable.from_litellm(["openai/gpt-4o-audio-preview-2025-06-03"], as_of="2026-12-01")
    row = audio.rows["openai/gpt-4o-audio-preview-2025-06-03"]
    assert row.output_audio is not None and row.output_audio > row.output
    assert row.worst_case(0, 1_000_000) == row.output_audio
    tiers = PriceTable.from_litellm(["openai/gpt-5"], as_of="2026-12-01").rows["openai/gpt-5"]
    assert set(tiers.tiers) == {"priority", "flex"}
    assert tiers.worst_case(1_000_000, 0) == tiers.tiers["priority"].input


# -- 4. secrets of the call and of the environment -------------------------------------------------
def test_a_key_in_the_calls_headers_or_the_environment_is_in_no_output(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A key in the call's `extra_headers`, and one LiteLLM reads from the environment
    (`OPENAI_API_KEY`, for a route that names none), echoed by the provider: none of them
    is in the exception chain, the traceback, the journey, `health()`, the attempt log,
    the report or a span."""
    header, env_key = "hdr-secret-4f9a2c81", "sk-env-secret-7b3e91d0"
    monkeypatch.setenv("OPENAI_API_KEY", env_key)
    fake.script("local", Fail(500, f"upstream saw Authorization {header} and key {env_key}"))
    spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    log = tmp_path / "attempts.sqlite"
    route = Route("openai/local", group="g", api_base=fake.base_url, capabilities=CAPS)
    router = Router([route], observers=[AttemptLog(log), OTelObserver(tracer_provider=tracing)])
    with pytest.raises(litellm.InternalServerError) as failed:
        router.completion(model="g", messages=HI, extra_headers={"Authorization": f"Bearer {header}"})
    seen = _outputs(failed.value, router, log, [], spans)
    assert header not in seen and env_key not in seen and "***" in str(failed.value)


def test_a_span_carries_the_class_and_status_never_the_providers_text(fake: FakeProvider) -> None:
    """A provider's error quoting the prompt leaves the process in no span."""
    fake.script("local", Fail(400, "could not parse: Say hello to the team."))
    spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))
    router = Router([_local(fake)], observers=[OTelObserver(tracer_provider=tracing)])
    with pytest.raises(litellm.BadRequestError):
        router.completion(model="g", messages=HI)
    statuses = [s.status.description or "" for s in spans.get_finished_spans()]
    assert "bad_request 400" in statuses and not any("hello" in s for s in statuses)


# -- 5. "sent" on the sync path ------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_header_the_client_cannot_send_is_no_attempt(fake: FakeProvider, mode: str) -> None:
    """A header value with CR/LF in it never leaves: no request received, no attempt
    counted, no route rests, and the caller gets the router's error (the HTTP client's own
    refusal is read as "not sent" on both paths: h11's LocalProtocolError sync, aiohttp's
    ValueError async)."""
    second = Route("openai/other", group="g", api_base=fake.base_url, api_key="sk-o",
                   capabilities=CAPS)
    router = Router([_local(fake), second])
    bad = {"X-Trace": "a\r\nInjected: yes"}
    with pytest.raises(ConfigError, match="not sent") as refused:
        if mode == "async":
            asyncio.run(router.acompletion(model="g", messages=HI, extra_headers=bad))
        else:
            router.completion(model="g", messages=HI, extra_headers=bad)
    assert fake.requests() == 0 and router.resting() == {}
    assert refused.value.journey.attempts == ()  # type: ignore[attr-defined]


def _outputs(
    error: BaseException | None, router: Router, log: Path | None, lines: list[str],
    spans: InMemorySpanExporter | None = None,
) -> str:
    """Every text a user can see of a request: the exception, its chain and traceback, the
    journey, health, the attempt log, the report, the log lines and the spans."""
    texts: list[str] = [*lines, repr(router.health()), str(router.report(since=None))]
    if error is not None:
        texts += [str(error), repr(error), *getattr(error, "__notes__", [])]
        texts += traceback.format_exception(error)
        cause: BaseException | None = error
        seen = 0
        while cause is not None and seen < 12:
            texts += [str(cause), repr(cause), repr(vars(cause)) if hasattr(cause, "__dict__") else ""]
            response = getattr(cause, "response", None)
            request = getattr(response, "request", None)
            if request is not None:
                texts += [str(request.url), repr(dict(request.headers))]
            cause, seen = cause.__cause__ or cause.__context__, seen + 1
        journey = getattr(error, "journey", None)
        texts += [str(journey), repr(journey)]
    if log is not None and log.exists():
        with sqlite3.connect(log) as db:
            texts += [repr(row) for row in db.execute("select * from attempts")]
            texts += [repr(row) for row in db.execute("select * from skips")]
    for span in spans.get_finished_spans() if spans is not None else ():
        texts += [str(span.status.description), repr(dict(span.attributes or {}))]
        texts += [repr(dict(e.attributes or {})) for e in span.events]
    return "\n".join(texts)


def test_the_guard_refuses_a_connection_off_the_machine_and_it_reads_as_not_sent() -> None:
    """While an on-device attempt runs, a connection to an address off loopback is refused
    before it is made (whatever made it), and the router reads the error as not sent."""
    from policy_router.drive.seam.failures import classify
    from policy_router.ground.outcome import OffDeviceConnection

    with guard.on_device(frozenset()), socket_to(OUTSIDE) as attempt:
        assert isinstance(attempt, OffDeviceConnection)
    with guard.on_device(frozenset({OUTSIDE})), socket_to(OUTSIDE) as allowed:
        assert not isinstance(allowed, OffDeviceConnection)  # the declared host of a route
    with socket_to(OUTSIDE) as outside_a_floor:
        assert not isinstance(outside_a_floor, OffDeviceConnection)
    wrapped = litellm.InternalServerError("Connection error.", "openai", "m")
    wrapped.__cause__ = OffDeviceConnection("refused")
    fault = classify(wrapped)
    assert fault is not None and not fault.sent


@contextlib.contextmanager
def socket_to(host: str) -> Iterator[BaseException | None]:
    """Try a TCP connect to a closed port of `host`; yield the error it ended with."""
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        try:
            s.connect((host, 9))
        except BaseException as error:
            yield error
            return
        yield None


# -- 7. the smaller breaks -----------------------------------------------------------------
@pytest.mark.parametrize("after", ["999999999", "inf"])
def test_a_huge_retry_after_does_not_close_a_window_for_good(fake: FakeProvider, after: str) -> None:
    """`Retry-After: 999999999` or `inf` is honoured for an hour at most, and `reset()`
    reopens the window a 429 closed."""
    from policy_router.drive.seam.failures import RETRY_AFTER_CAP

    fake.script("local", Fail(429, "slow down", retry_after=float(after)))
    router = Router([_local(fake, rpm=100)])
    with pytest.raises(litellm.RateLimitError):
        router.completion(model="g", messages=HI)
    window = router.usage()["openai/local"]
    assert 0 < window.closed_for <= RETRY_AFTER_CAP
    router.reset()
    assert router.usage()["openai/local"].closed_for == 0
    assert router.completion(model="g", messages=HI).choices[0].message.content


def test_a_huge_retry_after_through_redis_is_capped(fake: FakeProvider, redis_server: Any) -> None:
    """The same with Redis, where `inf` used to crash the call."""
    from policy_router import RedisStore

    fake.script("local", Fail(429, "slow down", retry_after=float("inf")))
    router = Router([_local(fake, rpm=100)], store=RedisStore(redis_server.url),
                    name=f"wire-{time.monotonic_ns()}")
    with pytest.raises(litellm.RateLimitError):
        router.completion(model="g", messages=HI)
    assert 0 < router.usage()["openai/local"].closed_for <= 3600
    router.reset()
    assert router.usage()["openai/local"].closed_for == 0


def test_ctrl_c_during_a_sync_call_gives_back_its_reservation_and_slot(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt in the middle of a sync call: nothing it held stays held."""
    from policy_router.drive.seam import transport

    def interrupted(*_: Any, **__: Any) -> Any:
        raise KeyboardInterrupt

    router = Router([_local(fake, rpm=10)], budget=Budget("1.00"))
    monkeypatch.setattr(transport, "_called", interrupted)
    with pytest.raises(KeyboardInterrupt):
        router.completion(model="g", messages=HI, max_tokens=20)
    spent = router.spending()
    assert spent.reserved == Money(0) and spent.in_flight == 0
    assert router.usage()["openai/local"].in_flight == 0


def test_a_deadline_of_ten_billion_seconds_is_no_overflow(fake: FakeProvider) -> None:
    """`deadline=1e10` waits as long as the platform can, not `OverflowError`."""
    router = Router([_local(fake)])
    assert router.completion(model="g", messages=HI, deadline=1e10).choices[0].message.content


def test_a_route_removed_while_its_request_is_in_flight_does_not_come_back_resting(
    fake: FakeProvider,
) -> None:
    """The in-flight request fails after the route was removed: nothing is written of it,
    so the route added back starts fresh."""
    from policy_router import Breaker

    fake.script("local", Hang(0.5, Reply("late")), Reply("fresh"))
    route = _local(fake, timeout=0.2)
    other = Route("openai/other", group="g", api_base=fake.base_url, api_key="sk-o", capabilities=CAPS)
    router = Router([route, other], breaker=Breaker(failures=1))
    done = threading.Event()

    def call() -> None:
        with contextlib.suppress(Exception):
            router.completion(model="g", messages=HI)
        done.set()

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.05)
    router.reconfigure(routes=[other])
    worker.join(5)
    router.reconfigure(routes=[route, other])
    assert router.resting() == {} and router.health()["openai/local"].failures == 0


def test_strict_with_unpriced_allowed_refuses_the_unpriced_route(fake: FakeProvider) -> None:
    """A strict budget refuses what it cannot bound, and an unpriced call has no bound."""
    bare = Route("openai/local", group="g", api_base=fake.base_url, api_key="sk-x", capabilities=CAPS)
    router = Router([bare], budget=Budget("1.00", strict=True, unpriced="allow"))
    with pytest.raises(OverBudgetError, match="unpriced under a strict budget"):
        router.completion(model="g", messages=HI, max_tokens=10)
    assert fake.requests() == 0 and not router.spending().overshoot_possible


@pytest.mark.parametrize("mode", ["plan", "lane"])
def test_a_200_with_no_choices_is_the_providers_fault(fake: FakeProvider, mode: str) -> None:
    """`choices: []` is no answer: the next route is asked (on the express lane too)."""
    fake.script("local", Reply("", usage=(3, 0), choices=0))
    other = Route("openai/declared", group="g", api_base=fake.base_url, api_key="sk-o",
                  capabilities=CAPS, prices=PRICES)
    budget = Budget("1.00") if mode == "plan" else None
    router = Router([_local(fake), other], budget=budget)
    routed = router.route(model="g", messages=HI, max_tokens=10)
    assert routed.route.name == "openai/declared"
    assert [a.outcome for a in routed.journey.attempts] == ["server_error", "answered"]


def test_os_environ_inside_nested_extra_headers_is_resolved(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`extra_headers: {X-Key: os.environ/NAME}` sends the variable's value, and it is a
    secret of the route."""
    monkeypatch.setenv("WIRE_HEADER_KEY", "nested-header-secret-91")
    router = Router.from_config(
        {"groups": {"g": {"routes": [{
            "model": "openai/local", "api_base": fake.base_url, "api_key": "os.environ/WIRE_HEADER_KEY",
            "extra_headers": {"X-Key": "os.environ/WIRE_HEADER_KEY", "X-Plain": "ok"},
            "capabilities": CAPS,
        }]}}}
    )
    route = router.routes[0]
    assert route.kwargs["extra_headers"] == {"X-Key": "nested-header-secret-91", "X-Plain": "ok"}
    assert "nested-header-secret-91" in route.secrets and "nested" not in repr(route)


# -- 6. Redis refusing a command is an outage --------------------------------------------------
def _refusing(server: Any, how: str) -> tuple[str, Any]:
    """Make `server` refuse the router's commands as `how` says; the URL the router uses,
    and what puts the server back."""
    import redis

    admin = redis.Redis.from_url(server.url)
    if how == "OOM":
        admin.config_set("maxmemory-policy", "noeviction")
        admin.config_set("maxmemory", "1")
        return server.url, lambda: admin.config_set("maxmemory", "0")
    if how == "READONLY":
        admin.execute_command("REPLICAOF", "127.0.0.1", "1")  # a master that never answers
        return server.url, lambda: admin.execute_command("REPLICAOF", "NO", "ONE")
    admin.execute_command("ACL", "SETUSER", "limited", "on", ">limited-pw", "~*", "+@all", "-eval", "-evalsha")
    url = f"redis://limited:limited-pw@127.0.0.1:{server.port}/0"
    return url, lambda: admin.execute_command("ACL", "SETUSER", "limited", "+eval", "+evalsha")


@pytest.mark.parametrize("how", ["OOM", "READONLY", "NOPERM"])
def test_redis_refusing_commands_refuses_a_budgeted_call_before_sending(
    fake: FakeProvider, how: str
) -> None:
    """OOM, READONLY (a replica after a failover), NOPERM (an ACL): a budgeted call is
    refused with `OverBudgetError` naming the store, nothing sent, never a raw `redis`
    exception; once Redis serves again, calls go on and nothing stays reserved."""
    from policy_router import RedisStore

    from ._redis import RedisServer

    with RedisServer() as server:
        url, restore = _refusing(server, how)
        store = RedisStore(url, retry_every=0.05)
        router = Router([_local(fake)], budget=Budget("1.00"), store=store,
                        name=f"refusing-{how}-{time.monotonic_ns()}")
        with pytest.raises(OverBudgetError, match="budget store unreachable"):
            router.completion(model="g", messages=HI, max_tokens=10)
        assert fake.requests() == 0
        restore()
        time.sleep(0.1)
        assert router.completion(model="g", messages=HI, max_tokens=10).choices
        assert router.spending().reserved == Money(0) and router.spending().calls == 1


def test_a_settlement_redis_refuses_after_the_answer_is_queued_and_replayed_once(
    fake: FakeProvider,
) -> None:
    """Redis runs out of memory between the reservation and the settlement: the caller
    gets the provider's answer (never a raw `redis` error), the settlement is queued and
    written once when Redis takes writes again; the reservation is not held for good."""
    import redis

    from policy_router import RedisStore

    from ._redis import RedisServer

    with RedisServer() as server:
        admin = redis.Redis.from_url(server.url)
        router = Router([_local(fake)], budget=Budget("1.00"), store=RedisStore(server.url, retry_every=0.05),
                        name=f"settle-oom-{time.monotonic_ns()}")

        def refuse_after_reply(path: str, body: dict[str, Any]) -> Reply:
            admin.config_set("maxmemory-policy", "noeviction")
            admin.config_set("maxmemory", "1")
            return Reply("answered before Redis filled up", usage=(5, 5))

        fake.responder = refuse_after_reply
        try:
            answer = router.completion(model="g", messages=HI, max_tokens=10)
        finally:
            fake.responder = None
        assert answer.choices[0].message.content == "answered before Redis filled up"
        admin.config_set("maxmemory", "0")
        time.sleep(0.1)
        router.completion(model="g", messages=HI, max_tokens=10)  # replays the queued write
        spent = router.spending()
        assert spent.calls == 2 and spent.reserved == Money(0)


@pytest.mark.parametrize(
    "message",
    ["BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
     "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist",
     "LOADING Redis is loading the dataset in memory",
     "CLUSTERDOWN The cluster is down"],
)
def test_every_refusal_but_a_script_bug_is_an_outage(message: str) -> None:
    """Read the way the store reads an error: BUSY, MISCONF, LOADING and a cluster down are
    outages; an error saying a script of ours failed is a bug, raised as it is."""
    import redis

    from policy_router.state.redis.refusals import script_failed as _script_failed

    assert not _script_failed(redis.ResponseError(message))
    inside = f"Error running script (call to f_1): @user_script:74: @user_script: 74: -{message}"
    assert not _script_failed(redis.ResponseError(inside))  # refused inside a script (Redis 6)
    assert _script_failed(redis.ResponseError("ERR user_script:12: attempt to compare nil with number"))


# -- the generated test at the wire --------------------------------------------------------------
secret_text = st.text("abcdefghijkmnpqrstuvwxyz23456789", min_size=14, max_size=20)
TOOLS: dict[str, list[dict[str, Any]]] = {
    "none": [],
    "function": [{"type": "function", "function": {"name": "f", "description": "d",
                                                   "parameters": {"type": "object", "properties": {}}}}],
    "googleSearch": [{"googleSearch": {}}],
    "codeExecution": [{"codeExecution": {}}],
    "web_search": [{"type": "web_search_preview"}],
}
CAPS_DRAWN = st.sampled_from([
    {}, {"max_tokens": 1}, {"max_completion_tokens": 300}, {"max_tokens": 2, "max_completion_tokens": 250},
    {"max_tokens": 3, "extra_body": {"max_tokens": 200}}, {"max_tokens": 40, "extra_body": {"n": 3}},
    {"max_completion_tokens": 5, "extra_body": {"max_completion_tokens": 120, "n": 2}},
])
STEPS = st.sampled_from(["reply", "reply missing", "reply null", "fail 500", "fail 429", "drop", "cut", "hang"])


@st.composite
def wire_cases(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "proxy var": draw(st.sampled_from([None, "HTTP_PROXY", "http_proxy", "ALL_PROXY", "HTTPS_PROXY"])),
        "no_proxy": draw(st.sampled_from([None, "127.0.0.1", "localhost,127.0.0.1", "*", "127.0.0.0/8", "example.com"])),
        "global base": draw(st.booleans()),
        "env after build": draw(st.booleans()),
        "on_device": draw(st.booleans()),
        "mode": draw(st.sampled_from(["sync", "async", "stream", "astream"])),
        "caps": draw(CAPS_DRAWN),
        "n": draw(st.sampled_from([None, 1, 2])),
        "tools": draw(st.sampled_from(sorted(TOOLS))),
        "header": draw(st.sampled_from(["none", "authorization", "api-key"])),
        "local step": draw(STEPS),
        "vendor step": draw(STEPS),
        "cap": draw(st.sampled_from(["0.30", "2.00", "20.00"])),
        "strict": draw(st.booleans()),
        "key": draw(secret_text),
        "header secret": draw(secret_text),
        "env key": draw(secret_text),
        "text": draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=60)),
    }


def _step(name: str, secrets: tuple[str, ...], stream: bool) -> Any:
    words = Reply(" ".join(["word"] * 60))
    echo = " ".join(secrets)
    return {
        "reply": words,
        "reply missing": Reply(words.text, report_usage="missing"),
        "reply null": Reply(words.text, report_usage="null"),
        "fail 500": Fail(500, f"upstream echoed {echo}"),
        "fail 429": Fail(429, f"slow down {echo}", retry_after=1.0),
        "drop": Drop(),
        "cut": Cut(after=2, reply=words),
        "hang": Hang(0.6, words),
    }[name]


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


def _run(router: Router, case: dict[str, Any], kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """Send the case's request as its mode says; the journey, and the error it ended with."""
    mode = case["mode"]
    try:
        if mode == "sync":
            return router.route(model="g", **kwargs).journey, None
        if mode == "async":
            return asyncio.run(router.aroute(model="g", **kwargs)).journey, None
        if mode == "stream":
            stream = router.completion(model="g", stream=True, **kwargs)
            try:
                list(stream)
            except Exception as failed:  # a failure after the first chunk
                return stream.journey, failed
            return stream.journey, None

        async def astream() -> Any:
            stream = await router.acompletion(model="g", stream=True, **kwargs)
            try:
                await _drain(stream)
            except Exception as failed:
                return stream.journey, failed
            return stream.journey, None

        return asyncio.run(astream())
    except Exception as failed:
        return getattr(failed, "journey", None), failed


@settings(
    max_examples=45,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=wire_cases())
def test_every_promise_holds_at_the_wire(
    fake: FakeProvider, vendor: FakeProvider, proxy: RecordingProxy, tmp_path_factory: pytest.TempPathFactory,
    case: dict[str, Any],
) -> None:
    """Whatever the environment, the route table, the body, the reply and the fault: no
    connection off the machine during an on-device request (and the vendor and the proxy
    off loopback receive nothing then), requests received == attempts, a bounded attempt
    is never billed above what it reserved, spent >= billed (a reply without usage, an
    attempt abandoned after the write), spent <= cap unless overshoot was possible, and no
    secret (the route's key, the call's header, the environment's key, all echoed by the
    provider) in any output."""
    fake.reset()
    vendor.reset()
    proxy.reset()
    key, header, env_key = f"sk-{case['key']}", case["header secret"], f"sk-env-{case['env key']}"
    # The secrets the router is given (a header only when the call carries one), all echoed.
    secrets = (key, env_key) if case["header"] == "none" else (key, header, env_key)
    stream = case["mode"] in ("stream", "astream")
    fake.script("local", _step(case["local step"], secrets, stream))
    vendor.script("vendor", _step(case["vendor step"], secrets, stream))
    env: dict[str, str | None] = {"HTTP_PROXY": None, "http_proxy": None, "HTTPS_PROXY": None,
                                  "https_proxy": None, "ALL_PROXY": None, "all_proxy": None,
                                  "NO_PROXY": case["no_proxy"], "no_proxy": None,
                                  "OPENAI_API_KEY": env_key}
    if case["proxy var"]:
        env[case["proxy var"]] = proxy.url
    log = tmp_path_factory.mktemp("wire") / "attempts.sqlite"
    spans = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(spans))

    def routes() -> list[Route]:
        return [
            Route("openai/local", group="g", api_base=fake.base_url, api_key=key,
                  capabilities=CAPS, prices=PRICES, timeout=0.3),
            Route("ollama_chat/llama3.1", group="g", api_base=fake.base_url.removesuffix("/v1"),
                  capabilities=CAPS, prices=PRICES, timeout=0.3),
            # No key of its own: LiteLLM reads OPENAI_API_KEY from the environment.
            Route("openai/vendor", group="g", api_base=vendor.base_url, capabilities=CAPS,
                  prices=PRICES, timeout=0.3),
        ]

    books = Books()
    budget = Budget(case["cap"], strict=case["strict"])
    observers = [AttemptLog(log), OTelObserver(tracer_provider=tracing)]
    router = None if case["env after build"] else Router(routes(), budget=budget, store=books, observers=observers)
    kwargs: dict[str, Any] = {"messages": [{"role": "user", "content": case["text"] or "hi"}], **case["caps"]}
    if case["n"] is not None:
        kwargs["n"] = case["n"]
    if TOOLS[case["tools"]]:
        kwargs["tools"] = TOOLS[case["tools"]]
    if case["header"] == "authorization":
        kwargs["extra_headers"] = {"Authorization": f"Bearer {header}"}
    elif case["header"] == "api-key":
        kwargs["extra_headers"] = {"api-key": header}
    if case["on_device"]:
        kwargs["on_device"] = True
    lines: list[str] = []
    sink = logger.add(lines.append, level="DEBUG", filter="policy_router")  # the suite enables it
    global_base = vendor.base_url.removesuffix("/v1") if case["global base"] else None
    try:
        with environment(env, api_base=global_base):
            if router is None:
                router = Router(routes(), budget=budget, store=books, observers=observers)
            with on_the_floor() as connects:
                journey, error = _run(router, case, kwargs)
                floor_connects = list(connects) if case["on_device"] else []
            _settled(router)
            if "hang" in (case["local step"], case["vendor step"]):
                time.sleep(0.7)  # the fake writes (and bills) its reply when its hang ends
    finally:
        logger.remove(sink)
    assert journey is not None, error
    # The floor: nothing off the machine, nothing at the vendor or through the proxy.
    if case["on_device"]:
        assert all(_loopback(h) for h in floor_connects), (floor_connects, case)
        assert vendor.requests() == 0 and proxy.connections == 0, case
        assert all(a.route != "openai/vendor" for a in journey.attempts)
    # One request per attempt, as the provider counts them.
    sent = [a for a in journey.attempts if a.sent]
    assert fake.requests() + vendor.requests() == len(sent), (journey, case)
    # Money: every bill covered by what was reserved and charged.
    billed = PER_TOKEN * (sum(fake.bills()) + sum(vendor.bills()))
    spent = router.spending()
    assert spent.reserved == Money(0), spent
    if not spent.overshoot_possible:  # every call bounded: the bound and the charge hold
        assert sum(held for held, _, _, _ in books.bills) >= billed, (books.bills, billed)
        assert spent.spent.micros >= billed, (spent, billed, journey)
        assert spent.spent <= spent.cap
    # Secrets: none in anything the caller, the logs, the attempt log or a span can show.
    seen = _outputs(error, router, log, lines, spans) + str(journey)
    for secret in secrets:
        assert secret not in seen, (secret, case)


# -- the checkpoint refuses nothing the reservation covers, whatever the provider ---------------
PROVIDERS = ["openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5", "gemini/gemini-2.5-flash",
             "mistral/mistral-small-latest", "deepseek/deepseek-chat", "ollama_chat/llama3.1"]
MIXED = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=120)


@st.composite
def provider_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    roles = draw(st.lists(st.sampled_from(["user", "assistant", "system"]), min_size=1, max_size=5))
    messages = [{"role": r, "content": draw(MIXED) or "hi"} for r in roles]
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": draw(MIXED) or "go on"})
    kwargs: dict[str, Any] = {"messages": messages, **draw(CAPS_DRAWN)}
    if draw(st.booleans()):
        kwargs["tools"] = TOOLS["function"]
    if draw(st.booleans()):
        props = {f"f{i}": {"type": "string", "description": draw(MIXED)} for i in range(draw(st.integers(1, 4)))}
        kwargs["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "answer", "schema": {"type": "object", "properties": props}}}
    return draw(st.sampled_from(PROVIDERS)), kwargs


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(call=provider_calls())
def test_the_body_each_provider_is_sent_fits_what_was_reserved(
    monkeypatch: pytest.MonkeyPatch, call: tuple[str, dict[str, Any]]
) -> None:
    """For Anthropic, Gemini, Mistral, DeepSeek, Ollama and OpenAI, LiteLLM rewrites the
    call into the provider's body (text parts, `system`, `generationConfig`, `options`,
    tools in its own spelling, `response_format` as a tool or a schema): the body as sent
    never bills more than the reservation made from the call's keywords, so the checkpoint
    stops nothing an honest reading covered. (Nothing listens at the route's base: the
    attempt ends at the connection, after the checkpoint.)"""
    from policy_router.core import checkpoint

    model, kwargs = call
    refusals: list[str] = []
    real = checkpoint.Checkpoint._bound

    def watched(self: Any, extra: Any, wire: Any) -> Any:
        refused = real(self, extra, wire)
        if refused is not None:
            refusals.append(refused.message)
        return refused

    monkeypatch.setattr(checkpoint.Checkpoint, "_bound", watched)
    row = {model: {"input": "1", "output": "1"}}
    prices = PriceTable.from_dict({"currency": "USD", "as_of": "2026-12-01", "source": "t", "models": row})
    route = Route(model, group="g", api_base="http://127.0.0.1:9", api_key="sk-x",
                  capabilities={"chat": True, "tools": True, "structured_output": True},
                  output_limit=4096, prices=prices)
    router = Router([route], budget=Budget("100.00"))
    with contextlib.suppress(Exception):
        router.completion(model="g", **kwargs)
    assert refusals == [], (model, kwargs)
